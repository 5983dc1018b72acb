"""The fit check (gropd/model/fit.py) on the real Qwen3-32B, Qwen3-4B and Qwen3-1.7B config.json numbers, on an
H100 80 GB and an H200 141 GB (total memory as nvidia-smi reports it): vLLM engines at tensor parallel 1 and 4,
a batch's KV cache in waves, the trainer's memory."""

from __future__ import annotations

import pytest

from gropd.model.fit import (
    GIB,
    TRAINER_SLACK_GIB,
    Architecture,
    FitError,
    estimate,
    logit_rows,
    model_runner_v2,
    require_fit,
    trainer_memory,
)

# config.json of Qwen/Qwen3-32B and Qwen/Qwen3-4B (the fields that decide memory)
QWEN3_32B = {
    "vocab_size": 151936,
    "hidden_size": 5120,
    "num_hidden_layers": 64,
    "intermediate_size": 25600,
    "num_attention_heads": 64,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "tie_word_embeddings": False,
}
QWEN3_4B = {
    "vocab_size": 151936,
    "hidden_size": 2560,
    "num_hidden_layers": 36,
    "intermediate_size": 9728,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "tie_word_embeddings": True,
}
QWEN3_1_7B = {
    "vocab_size": 151936,
    "hidden_size": 2048,
    "num_hidden_layers": 28,
    "intermediate_size": 6144,
    "num_attention_heads": 16,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "tie_word_embeddings": True,
}
H100, H200 = 81559 * 2**20, 143771 * 2**20  # MiB as nvidia-smi lists them
THINK_EVAL_LEN = 2048 + 32768  # backend.max_prompt_tokens + eval think max_new_tokens
TRAIN_LEN = 2048 + 8192


def test_parameter_counts_by_hand() -> None:
    # 32B: untied embedding and head 2 x 151936 x 5120; per layer q 5120x8192, k and v 5120x1024 each,
    # o 8192x5120, MLP 3 x 5120 x 25600, norms 2 x 5120 + 2 x 128; 64 layers; final norm 5120
    layer = 5120 * 8192 + 2 * 5120 * 1024 + 8192 * 5120 + 3 * 5120 * 25600 + 2 * 5120 + 2 * 128
    assert Architecture.of(QWEN3_32B).parameters() == 2 * 151936 * 5120 + 64 * layer + 5120 == 32_762_123_264
    layer = 2560 * 4096 + 2 * 2560 * 1024 + 4096 * 2560 + 3 * 2560 * 9728 + 2 * 2560 + 2 * 128
    assert Architecture.of(QWEN3_4B).parameters() == 151936 * 2560 + 36 * layer + 2560 == 4_022_468_096
    # KV per token: 2 (K, V) x layers x KV heads per rank x head_dim x 2 bytes (bf16)
    assert Architecture.of(QWEN3_32B).kv_bytes_per_token("bfloat16", 1) == 2 * 64 * 8 * 128 * 2
    assert Architecture.of(QWEN3_32B).kv_bytes_per_token("bfloat16", 4) == 2 * 64 * 2 * 128 * 2


@pytest.mark.parametrize(
    ("model", "tp", "fraction", "length", "rows", "gpu", "fits"),
    [
        # Table 6's 32B evaluation as configured before: TP 1 at 0.85 of an 80 GB card: 61 GiB of weights
        # + 8.5 GiB of KV for one 34,816-token sequence + 2.6 GiB of workspace > 67.7 GiB
        (QWEN3_32B, 1, 0.85, THINK_EVAL_LEN, 1024, H100, False),
        (QWEN3_32B, 1, 0.85, THINK_EVAL_LEN, 1024, H200, True),  # 119 GiB on an H200
        (QWEN3_32B, 4, 0.85, THINK_EVAL_LEN, 1024, H100, True),  # 15.3 GiB of weights a GPU
        # the 32B as an in-process teacher at 0.3 of a training GPU: never at TP 1, not even on an H200
        (QWEN3_32B, 1, 0.3, TRAIN_LEN, 1024, H100, False),
        (QWEN3_32B, 1, 0.3, TRAIN_LEN, 1024, H200, False),
        (QWEN3_32B, 4, 0.3, TRAIN_LEN, 1024, H100, True),
        # the 4B teacher at 0.3: 7.5 + 1.4 + 2.6 GiB (V2) or + 4.3 GiB (V1's 4,096-row chunk) fits an 80 GB card
        (QWEN3_4B, 1, 0.3, TRAIN_LEN, 1024, H100, True),
        (QWEN3_4B, 1, 0.3, TRAIN_LEN, 4096, H100, True),
        (QWEN3_4B, 4, 0.3, TRAIN_LEN, 4096, H200, True),
    ],
)
def test_fits_as_worked_out(model, tp, fraction, length, rows, gpu, fits) -> None:
    fit = estimate(
        Architecture.of(model),
        dtype="bfloat16",
        tensor_parallel=tp,
        max_model_len=length,
        logit_rows=rows,
        fraction=fraction,
        gpu_bytes=gpu,
    )
    assert fit.fits is fits, f"need {fit.need / GIB:.1f} GiB, budget {fit.budget / GIB:.1f} GiB"


def test_a_misfit_says_what_does_not_fit_and_what_to_set() -> None:
    fit = estimate(
        Architecture.of(QWEN3_32B),
        dtype="bfloat16",
        tensor_parallel=1,
        max_model_len=THINK_EVAL_LEN,
        logit_rows=1024,
        fraction=0.85,
        gpu_bytes=H100,
    )
    with pytest.raises(FitError, match=r"Qwen3-32B does not fit: weights 61.0 \+ KV 8.5 .* > 67.7 GiB.*Set backend"):
        require_fit("Qwen3-32B", fit, "backend.tensor_parallel")


def test_which_model_runner_and_how_many_logit_rows() -> None:
    """vLLM 0.33.0 `VllmConfig.use_v2_model_runner`: the variable when set, else V2 on CUDA; V2's prompt
    log-probs take 1,024 rows at a time (prompt_logprob.py CHUNK_SIZE), V1's the whole scheduled chunk."""
    assert model_runner_v2({}, cuda=True) and not model_runner_v2({}, cuda=False)
    assert not model_runner_v2({"VLLM_USE_V2_MODEL_RUNNER": "0"}, cuda=True)
    assert model_runner_v2({"VLLM_USE_V2_MODEL_RUNNER": "1"}, cuda=False)
    assert logit_rows(4096, v2=True) == 1024 and logit_rows(16384, v2=True) == 1024 and logit_rows(512, v2=True) == 512
    assert logit_rows(4096, v2=False) == 4096


def test_a_rollout_batch_takes_waves_when_its_kv_cache_does_not_hold_it() -> None:
    """Table 3 on 8 GPUs: 64 responses per rank, up to 10,240 tokens each, KV 2 x 28 layers x 8 heads x 128 x 2 B
    = 112 KiB a token: 70 GiB for the batch against 0.3 x 79.6 - 3.2 weights - 2.6 workspace = 18.1 GiB of cache
    on an H100 (16 sequences at once: 4 waves), 36.3 GiB on an H200 (33: 2 waves)."""
    arch = Architecture.of(QWEN3_1_7B)
    assert arch.kv_bytes_per_token("bfloat16", 1) == 2 * 28 * 8 * 128 * 2 == 114688
    assert 64 * TRAIN_LEN * 114688 / GIB == 70.0
    waves = {}
    for gpu in (H100, H200):
        fit = estimate(
            arch,
            dtype="bfloat16",
            tensor_parallel=1,
            max_model_len=TRAIN_LEN,
            logit_rows=1024,
            fraction=0.3,
            gpu_bytes=gpu,
        )
        cache = fit.budget - fit.weights - fit.workspace
        assert fit.at_once() == int(cache // (TRAIN_LEN * 114688))
        waves[gpu] = (fit.at_once(), fit.waves(64))
    assert waves == {H100: (16, 4), H200: (33, 2)}


def test_the_trainers_memory_by_hand() -> None:
    """Qwen3-1.7B (1,720,574,976 parameters): 16 bytes each of float32 masters, gradients and AdamW state is
    25.6 GiB unsharded, 3.2 GiB a GPU under FSDP over 8; autocast's bf16 copies 3.2 GiB without FSDP, the embedding
    and two layers under FSDP2 on any number of ranks; a 10,240-token row with checkpointing keeps 28 layers x 2048
    x 4 B a token plus one layer's (10 x 2048 + 4 x 6144) x 2 B; foreach AdamW's sqrt(v) 4 B a parameter, after the
    backward (so the larger of it and compute + activations counts), none when fused."""
    arch = Architecture.of(QWEN3_1_7B)
    params = arch.parameters()
    assert params == 151936 * 2048 + 28 * arch.layer_parameters() + 2048 == 1_720_574_976
    settings = dict(dtype="bfloat16", row_tokens=TRAIN_LEN, rows=1, checkpointing=True)
    one = trainer_memory(arch, shards=1, fsdp=False, fused=True, forward_tokens=8192, **settings)
    assert one.states == params * 16 and round(one.states / GIB, 1) == 25.6
    assert one.compute == params * 2 and one.optimizer == 0
    assert one.activations == TRAIN_LEN * (28 * 2048 * 4 + (10 * 2048 + 4 * 6144) * 2)
    # a CUDA log-prob chunk: 2^28 // 151936 = 1,766 tokens, 4 float32 [chunk, V] copies (4.0 GiB); the head's
    # gradient temporaries while the chunks run: float32 sum 4 + bf16 product 2 + its float32 copy 4 bytes of V x H
    assert one.logits == 4 * 1766 * 151936 * 4 and round(one.logits / GIB, 1) == 4.0
    assert one.head == 151936 * 2048 * 10 and round(one.head / GIB, 1) == 2.9
    working = one.compute + one.activations + one.logits + one.head
    assert one.need == one.states + working + TRAINER_SLACK_GIB * GIB
    eight = trainer_memory(arch, shards=8, fsdp=True, fused=True, forward_tokens=32768, **settings)
    units = (151936 * 2048 + 2 * arch.layer_parameters()) * 2
    assert eight.states == params * 2 and eight.compute == units
    assert eight.activations == 32768 * ((10 * 2048 + 4 * 6144) * 2 + 2 * 2048 * 4)  # the no-grad forward is larger
    # the single-process GPU route beside two engines at 0.3 of an 80 GB card does not fit; FSDP over 8 does
    assert one.need + 0.6 * H100 > H100 and eight.need + 0.6 * H100 < H100
    unfused = trainer_memory(arch, shards=8, fsdp=True, fused=False, forward_tokens=32768, **settings)
    assert unfused.optimizer == params * 4 / 8 and unfused.need == eight.need  # sqrt(v) < compute + activations
    float32 = trainer_memory(
        arch, **{**settings, "dtype": "float32"}, shards=1, fsdp=False, fused=True, forward_tokens=8192
    )
    assert float32.compute == 0  # float32 compute: no autocast copies


def test_the_trainers_memory_against_the_h200_measurement() -> None:
    """gpu_check's update phase on an H200 (issue 43): FSDP2 on 1 rank, foreach AdamW, 8 micro-steps of one
    2,048- or 8,192-token response after a 256-token prompt: a peak of 34.7 GiB at both lengths. The estimate
    bounds it from above, within 10%: the backward's chunk (4 GiB) and head temporaries (2.9 GiB) beside the
    compute copies and activations outweigh foreach AdamW's sqrt(v) (4 bytes a parameter, 6.4 GiB); fused AdamW
    takes that temporary away and changes nothing here."""
    arch = Architecture.of(QWEN3_1_7B)
    params = arch.parameters()
    for length in (2048, 8192):
        settings = dict(dtype="bfloat16", rows=1, forward_tokens=0, checkpointing=True, shards=1, fsdp=True)
        foreach = trainer_memory(arch, row_tokens=256 + length, fused=False, **settings)
        working = foreach.compute + foreach.activations + 4 * 1766 * 151936 * 4 + 151936 * 2048 * 10
        assert params * 4 < working and foreach.need == params * 16 + working + TRAINER_SLACK_GIB * GIB
        assert 34.7 <= foreach.need / GIB <= 34.7 * 1.1
        assert f"{foreach.need / GIB:.1f}" == {2048: "36.0", 8192: "37.8"}[length]  # as fit.py's docstring says
        fused = trainer_memory(arch, row_tokens=256 + length, fused=True, **settings)
        assert fused.need == foreach.need


def test_the_fit_counts_the_chunk_the_trainer_computes_with() -> None:
    """fit.py plans without torch, so it keeps the CUDA chunk's numbers itself: they must be chunked_logprobs'."""
    from gropd.model import chunked_logprobs
    from gropd.model.fit import LOGPROB_CUDA_ELEMENTS, LOGPROB_LIVE_COPIES

    assert LOGPROB_CUDA_ELEMENTS == chunked_logprobs.MAX_CHUNK_ELEMENTS
    assert LOGPROB_LIVE_COPIES == chunked_logprobs.LIVE_COPIES

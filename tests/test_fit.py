"""The vLLM fit check (gropd/model/fit.py) on the real Qwen3-32B and Qwen3-4B config.json numbers, on an
H100 80 GB and an H200 141 GB (total memory as nvidia-smi reports it), at tensor parallel 1 and 4."""

from __future__ import annotations

import pytest

from gropd.model.fit import GIB, Architecture, FitError, estimate, require_fit

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
    ("model", "tp", "fraction", "length", "batched", "gpu", "fits"),
    [
        # Table 6's 32B evaluation as configured before: TP 1 at 0.85 of an 80 GB card: 61 GiB of weights
        # + 8.5 GiB of KV for one 34,816-token sequence + 6.6 GiB of workspace > 67.7 GiB
        (QWEN3_32B, 1, 0.85, THINK_EVAL_LEN, 8192, H100, False),
        (QWEN3_32B, 1, 0.85, THINK_EVAL_LEN, 8192, H200, True),  # 119 GiB on an H200
        (QWEN3_32B, 4, 0.85, THINK_EVAL_LEN, 8192, H100, True),  # 15.3 GiB of weights a GPU
        # the 32B as an in-process teacher at 0.3 of a training GPU: never at TP 1, not even on an H200
        (QWEN3_32B, 1, 0.3, TRAIN_LEN, 4096, H100, False),
        (QWEN3_32B, 1, 0.3, TRAIN_LEN, 4096, H200, False),
        (QWEN3_32B, 4, 0.3, TRAIN_LEN, 4096, H100, True),
        # the 4B teacher at 0.3: 7.5 + 1.4 + 4.3 GiB fits an 80 GB card
        (QWEN3_4B, 1, 0.3, TRAIN_LEN, 4096, H100, True),
        (QWEN3_4B, 4, 0.3, TRAIN_LEN, 4096, H200, True),
    ],
)
def test_fits_as_worked_out(model, tp, fraction, length, batched, gpu, fits) -> None:
    fit = estimate(
        Architecture.of(model),
        dtype="bfloat16",
        tensor_parallel=tp,
        max_model_len=length,
        max_batched_tokens=batched,
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
        max_batched_tokens=8192,
        fraction=0.85,
        gpu_bytes=H100,
    )
    with pytest.raises(FitError, match=r"Qwen3-32B does not fit: weights 61.0 \+ KV 8.5 .* > 67.7 GiB.*Set backend"):
        require_fit("Qwen3-32B", fit, "backend.tensor_parallel")

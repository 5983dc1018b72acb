"""The paper profile's shapes on one GPU, no network: peak memory and tokens/s of an update step (bf16
compute over float32 masters, per-device batch 1, gradient checkpointing), of teacher scoring and of
rollouts, for responses of 2k and 8k tokens. Random weights from a Qwen3-1.7B-shaped config.

    python benchmarks/gpu_check.py [--device cuda] [--shape qwen3-1.7b|tiny] [--lengths 2048 8192]
                                   [--rollout-rows 16]

Rollouts use vLLM when it is installed (the random model saved to a temp dir, token-id prompts, no
tokenizer), else the transformers sampler (gropd/model/rollout/hf.py), capped at HF_ROLLOUT_CAP tokens.
`--device cpu --shape tiny` runs the same code on a CPU in seconds (tests/test_benchmarks.py keeps it
from breaking); its figures mean nothing. Prints a table and one JSON line.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import tempfile
import time

import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

from gropd.loss import clipped_policy_loss
from gropd.model.forward_batches import no_grad_logprobs
from gropd.model.logprobs import pack, response_logprobs
from gropd.model.rollout.base import SamplingSettings, StopRule
from gropd.model.rollout.hf import HFRollout

SHAPES = {  # config.json numbers of Qwen/Qwen3-1.7B (no weights: random)
    "qwen3-1.7b": dict(
        vocab_size=151936,
        hidden_size=2048,
        intermediate_size=6144,
        num_hidden_layers=28,
        num_attention_heads=16,
        num_key_value_heads=8,
        head_dim=128,
        tie_word_embeddings=True,
        max_position_embeddings=40960,
    ),
    "tiny": dict(
        vocab_size=512,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        tie_word_embeddings=True,
        max_position_embeddings=4096,
    ),
}
PROMPT = 256
HF_ROLLOUT_CAP = 512  # response tokens of the transformers-sampler rollout (vLLM rollouts take the full length)


class Meter:
    """Wall seconds and peak device memory of a block (CUDA peak; CPU reports none)."""

    def __init__(self, device: torch.device):
        self.device = device

    def __enter__(self) -> Meter:
        if self.device.type == "cuda":
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize()
        self.seconds = time.perf_counter() - self.start
        self.peak_gib = torch.cuda.max_memory_allocated() / 2**30 if self.device.type == "cuda" else None


def rows(vocab: int, count: int, length: int, seed: int) -> tuple[list[list[int]], list[list[int]]]:
    g = torch.Generator().manual_seed(seed)
    prompts = [torch.randint(3, vocab, (PROMPT,), generator=g).tolist() for _ in range(count)]
    return prompts, [torch.randint(3, vocab, (length,), generator=g).tolist() for _ in range(count)]


def update_step(model, optimizer, device, length: int) -> dict:
    """One optimiser step over 8 responses, one per forward/backward (Table 3's per-device batch 1)."""
    prompts, responses = rows(model.config.vocab_size, 8, length, 1)
    with Meter(device) as meter:
        for prompt, response in zip(prompts, responses, strict=True):
            batch = pack([prompt], [response], 0, device)
            with torch.autocast(device.type, dtype=torch.bfloat16):
                logp, _ = response_logprobs(model, batch)
            advantages = torch.randn_like(logp)
            loss, _ = clipped_policy_loss(logp, logp.detach(), advantages, batch.response_mask, 0.2, 0.28, "token-mean")
            (loss / len(responses)).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    return {
        "phase": "update (8 x 1 response)",
        "length": length,
        "seconds": meter.seconds,
        "tokens_per_s": 8 * (PROMPT + length) / meter.seconds,
        "peak_gib": meter.peak_gib,
    }


def teacher_scoring(model, device, length: int) -> dict:
    prompts, responses = rows(model.config.vocab_size, 8, length, 2)
    with Meter(device) as meter:
        no_grad_logprobs(model, prompts, responses, 0, device, max_tokens=32768)
    return {
        "phase": "teacher scoring (8 rows, bf16)",
        "length": length,
        "seconds": meter.seconds,
        "tokens_per_s": 8 * (PROMPT + length) / meter.seconds,
        "peak_gib": meter.peak_gib,
    }


def rollout(model, device, length: int, count: int) -> dict:
    prompts, _ = rows(model.config.vocab_size, count // 4, 1, 3)
    if importlib.util.find_spec("vllm") is not None and device.type == "cuda":
        import vllm

        with tempfile.TemporaryDirectory() as tmp:
            model.save_pretrained(tmp)
            llm = vllm.LLM(
                model=tmp,
                skip_tokenizer_init=True,
                dtype="bfloat16",
                gpu_memory_utilization=0.5,
                max_model_len=PROMPT + length + 8,
                seed=0,
            )
            params = vllm.SamplingParams(n=4, temperature=1.0, max_tokens=length, ignore_eos=True, detokenize=False)
            with Meter(device) as meter:
                outs = llm.generate([vllm.inputs.TokensPrompt(prompt_token_ids=p) for p in prompts], params)
            tokens = sum(len(c.token_ids) for o in outs for c in o.outputs)
            engine = "vLLM"
    else:  # one decode step per token in Python: capped so the check stays within its minutes
        length = min(length, HF_ROLLOUT_CAP)
        sampler = HFRollout(model, StopRule(()), lambda ids: "", 0, device)
        with Meter(device) as meter:
            batch = sampler.generate(prompts, 4, SamplingSettings(1.0, 1.0, length), seed=0)
        tokens, engine = sum(len(r) for r in batch.response_ids), "transformers sampler"
    return {
        "phase": f"rollout ({count} responses, {engine})",
        "length": length,
        "seconds": meter.seconds,
        "tokens_per_s": tokens / meter.seconds,
        "peak_gib": meter.peak_gib,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--shape", default="qwen3-1.7b", choices=sorted(SHAPES))
    parser.add_argument("--lengths", type=int, nargs="+", default=[2048, 8192])
    parser.add_argument("--rollout-rows", type=int, default=16)
    args = parser.parse_args()
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise SystemExit(f"gpu_check: no CUDA device visible to torch {torch.__version__} (CUDA {torch.version.cuda})")
    torch.manual_seed(0)
    with device:
        model = Qwen3ForCausalLM(Qwen3Config(**SHAPES[args.shape]))  # float32 masters
    model.gradient_checkpointing_enable()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6)
    table = [update_step(model, optimizer, device, n) for n in args.lengths]
    del optimizer
    model.eval()
    scorer = model.to(torch.bfloat16)  # a teacher's weights in the compute dtype
    table += [teacher_scoring(scorer, device, n) for n in args.lengths]
    table += [rollout(scorer, device, n, args.rollout_rows) for n in args.lengths]
    name = torch.cuda.get_device_name() if device.type == "cuda" else "CPU"
    print(f"{args.shape} on {name}, torch {torch.__version__}")
    print(f"{'phase':<44} {'tokens':>7} {'seconds':>8} {'tokens/s':>10} {'peak GiB':>9}")
    for row in table:
        peak = "—" if row["peak_gib"] is None else f"{row['peak_gib']:.1f}"
        print(f"{row['phase']:<44} {row['length']:>7} {row['seconds']:8.2f} {row['tokens_per_s']:10.0f} {peak:>9}")
    print(json.dumps({"benchmark": "gpu_check", "shape": args.shape, "device": name, "rows": table}))


if __name__ == "__main__":
    main()

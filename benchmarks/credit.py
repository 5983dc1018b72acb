"""Time credit + clipped loss (forward and backward w.r.t. logp_new) for both credit rules.

    python benchmarks/credit.py                    # B = 512 responses × T = 8,192 tokens, CPU
    python benchmarks/credit.py --batch 64 --tokens 1024 --threads 2 --device cuda

Inputs are random log-probs with right-padded responses of random length (at least
half of T). Prints a small table and one JSON line; times are medians of `--repeats`
runs after one warm-up.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from gropd.credit import token_advantages, token_feedback
from gropd.loss import clipped_policy_loss


def make_inputs(batch: int, tokens: int, device: str, seed: int = 0) -> dict[str, torch.Tensor]:
    """Random `[B, T]` teacher/old/new log-probs and a right-padded response mask."""
    gen = torch.Generator().manual_seed(seed)
    lengths = torch.randint(tokens // 2, tokens + 1, (batch,), generator=gen)
    mask = (torch.arange(tokens)[None, :] < lengths[:, None]).float()
    logp_old = -torch.rand(batch, tokens, generator=gen) * 3
    return {
        "teacher": (-torch.rand(batch, tokens, generator=gen) * 3).to(device),
        "old": logp_old.to(device),
        "new": (logp_old + 0.05 * torch.randn(batch, tokens, generator=gen)).to(device),
        "mask": mask.to(device),
    }


def step(method: str, inputs: dict[str, torch.Tensor], group_size: int) -> None:
    """One credit + loss forward + backward, as the trainer runs it."""
    logp_new = inputs["new"].detach().requires_grad_()
    f = token_feedback(inputs["teacher"], inputs["old"], inputs["mask"])
    A, _ = token_advantages(method, f, inputs["mask"], gamma=0.99, group_size=group_size, lam=0.25)
    loss, _ = clipped_policy_loss(logp_new, inputs["old"], A, inputs["mask"], 0.2, 0.28)
    loss.backward()


def time_method(method: str, inputs: dict[str, torch.Tensor], group_size: int, repeats: int) -> float:
    """Median wall seconds of `step` over `repeats` runs, after one warm-up."""
    cuda = inputs["mask"].is_cuda
    times = []
    for i in range(repeats + 1):
        if cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        step(method, inputs, group_size)
        if cuda:
            torch.cuda.synchronize()
        if i > 0:
            times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--tokens", type=int, default=8192)
    parser.add_argument("--group-size", type=int, default=8)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    inputs = make_inputs(args.batch, args.tokens, args.device)
    seconds = {m: time_method(m, inputs, args.group_size, args.repeats) for m in ("gropd", "opd")}
    print(f"credit + loss fwd/bwd, B={args.batch} T={args.tokens} {args.device} threads={args.threads}")
    print(f"{'method':<8}{'median s':>10}{'Mtok/s':>10}")
    for method, s in seconds.items():
        print(f"{method:<8}{s:>10.3f}{args.batch * args.tokens / s / 1e6:>10.1f}")
    record = {
        "benchmark": "credit",
        "batch": args.batch,
        "tokens": args.tokens,
        "device": args.device,
        "threads": args.threads,
        "repeats": args.repeats,
        "median_s": seconds,
    }
    print(json.dumps(record))


if __name__ == "__main__":
    main()

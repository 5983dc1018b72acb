"""Benchmark the tiny world: build time, held-out accuracy, response lengths, sampling speed.

    python benchmarks/tiny_world.py [--recipe experiments/tiny_world.yaml] [--threads 2]

Builds the world if needed (timed per model in world.json), prints each model's greedy
held-out accuracy and mean response length per mode, then times sampling 64 responses
(one batch, temperature 1.0) from each student with `model.generate`.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from eval.tiny_tasks import TASKS, train_questions
from gropd.templates import render_prompt, stop_token_ids
from gropd.tiny.world import ensure_tiny_world


def sampling_speed(model_dir: Path, tokenizer_dir: Path, mode: str, instruction: str, n: int = 64) -> dict:
    """Sample `n` responses (8 prompts per task mix, temperature 1.0) in one batch; tokens and seconds."""
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    records = [r for task in TASKS for r in train_questions(task, n // len(TASKS) + 1, seed=99)][:n]
    prompts = [render_prompt(r["question"], mode, tokenizer, instruction) for r in records]
    enc = tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
    stops = stop_token_ids(mode, tokenizer)
    torch.manual_seed(0)
    start = time.perf_counter()
    with torch.no_grad():
        out = model.generate(
            **enc,
            do_sample=True,
            temperature=1.0,
            top_p=1.0,
            top_k=0,
            max_new_tokens=200,
            eos_token_id=stops,
            pad_token_id=tokenizer.pad_token_id,
        )
    seconds = time.perf_counter() - start
    responses = out[:, enc["input_ids"].shape[1] :].tolist()
    tokens = sum(next((i + 1 for i, t in enumerate(r) if t in stops), len(r)) for r in responses)
    return {"responses": n, "tokens": tokens, "seconds": round(seconds, 2), "tokens_per_s": round(tokens / seconds)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", type=Path, default=Path("experiments/tiny_world.yaml"))
    parser.add_argument("--root", type=Path, default=Path("results/tiny/world"))
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    world = ensure_tiny_world(args.recipe, args.root)
    print(f"tiny world {world.recipe_hash} at {world.directory}")
    for label, entry in world.info["models"].items():
        for mode, acc in entry["accuracy"].items():
            tasks = " ".join(f"{t}={acc[t]:.2f}" for t in TASKS)
            print(
                f"{label:5s} {mode:8s} build {entry['build_seconds']:6.0f}s  avg {acc['avg']:.3f}  "
                f"tokens {acc['mean_tokens']:.1f}  {tasks}"
            )
    for label in ("B1.7", "I1.7"):
        for mode in world.info["models"][label]["modes"]:
            speed = sampling_speed(world.model_dir(label), world.tokenizer_dir, mode, world.instruction)
            print(f"sampling {label} {mode}: {speed}")


if __name__ == "__main__":
    main()

"""Rollout throughput on one GPU: the suite's VLLMRollout against bare `vllm.LLM.generate`.

    PYTHONPATH=. python benchmarks/vllm_rollout_bench.py --engine bare|suite [--profile tiny] [--label I1.7]
        [--mode nothink] [--prompts 8] [--n 8] [--max-new-tokens 200] [--repeats 3]

Both engines get the same batch: `--prompts` fixed addition questions rendered in
the student's mode, n samples each, the same per-request seeds and
stop tokens. Prints generated tokens per second (median over --repeats, after one
warm-up call); the suite engine also times sync_weights() from the transformers copy
of the same checkpoint. Run each engine in its own process (gpu_smoke.sh does).
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

from gropd.config import load_manifests
from gropd.model.checkpoints import checkpoint_ref, load_model, load_tokenizer
from gropd.model.rollout.base import SamplingSettings, StopRule
from gropd.model.rollout.vllm import VLLMRollout, request_seed
from gropd.templates import render_prompt, stop_token_ids

MEMORY_FRACTION = 0.3


def batch_prompts(tokenizer, mode: str, count: int) -> list[list[int]]:
    """Token ids of `count` fixed addition questions ("100+200", "101+203", ...) rendered in `mode`."""
    questions = [f"{100 + i}+{200 + 3 * i}" for i in range(count)]
    return [
        list(
            tokenizer.encode(
                render_prompt(q, mode, tokenizer, "Put the final answer in \\boxed{}."), add_special_tokens=False
            )
        )
        for q in questions
    ]


def timed(call, repeats: int) -> tuple[float, int]:
    """(median seconds, generated tokens) of `call()` -> list of responses, after one warm-up."""
    call()
    seconds, tokens = [], 0
    for _ in range(repeats):
        start = time.perf_counter()
        responses = call()
        seconds.append(time.perf_counter() - start)
        tokens = sum(len(r) for r in responses)
    return statistics.median(seconds), tokens


def bare_engine(ref, prompts, stops, args) -> tuple[float, int]:
    import vllm

    llm = vllm.LLM(
        model=ref.path,
        tokenizer=ref.tokenizer_path,
        revision=ref.revision,
        dtype="bfloat16",
        gpu_memory_utilization=MEMORY_FRACTION,
        seed=0,
    )
    params = [
        vllm.SamplingParams(
            n=args.n,
            temperature=1.0,
            top_p=1.0,
            max_tokens=args.max_new_tokens,
            logprobs=0,
            seed=request_seed(0, i, args.n),
            stop_token_ids=stops,
            ignore_eos=True,
        )
        for i in range(len(prompts))
    ]
    requests = [vllm.inputs.TokensPrompt(prompt_token_ids=p) for p in prompts]

    def call():
        outs = llm.generate(requests, params, use_tqdm=False)
        return [c.token_ids for o in outs for c in o.outputs]

    return timed(call, args.repeats)


def suite_engine(ref, prompts, stops, args) -> tuple[float, int]:
    engine = VLLMRollout(
        ref.path,
        revision=ref.revision,
        tensor_parallel=1,
        dtype="bfloat16",
        gpu_memory_utilization=MEMORY_FRACTION,
        seed=0,
        max_model_len=None,
        tokenizer=ref.tokenizer_path,
        rule=StopRule(tuple(stops)),
    )
    model = load_model(ref, torch.device("cuda"), "bfloat16")
    start = time.perf_counter()
    engine.sync_weights(model)
    torch.cuda.synchronize()
    print(f"suite sync_weights: {time.perf_counter() - start:.3f} s")
    sampling = SamplingSettings(temperature=1.0, top_p=1.0, max_new_tokens=args.max_new_tokens)
    return timed(lambda: engine.generate(prompts, args.n, sampling, seed=0).response_ids, args.repeats)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--engine", choices=["bare", "suite"], required=True)
    parser.add_argument("--profile", default="tiny")
    parser.add_argument("--label", default="I1.7")
    parser.add_argument("--mode", default="nothink")
    parser.add_argument("--prompts", type=int, default=8)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--max-new-tokens", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    ref = checkpoint_ref(load_manifests(Path("experiments")), args.profile, args.label)
    tokenizer = load_tokenizer(ref)
    prompts = batch_prompts(tokenizer, args.mode, args.prompts)
    stops = stop_token_ids(args.mode, tokenizer)
    seconds, tokens = (bare_engine if args.engine == "bare" else suite_engine)(ref, prompts, stops, args)
    print(
        f"{args.engine} vLLM rollout: {args.prompts} prompts x n={args.n}, {tokens} tokens in "
        f"{seconds:.3f} s = {tokens / seconds:,.0f} tokens/s"
    )


if __name__ == "__main__":
    main()

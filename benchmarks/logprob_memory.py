"""Peak memory and time of `response_logprobs` against response length: old (full log-softmax
over every position) vs new (response positions only, chunked over tokens).

    python benchmarks/logprob_memory.py                          # CPU, 2k / 4k / 8k tokens
    python benchmarks/logprob_memory.py --lengths 2048 4096 --impls new
    python benchmarks/logprob_memory.py --device cuda            # + one paper-shaped update step

Model: a random Qwen3 with the real vocabulary (151,936) and a tiny body (hidden 64, 2
layers), float32, built from a Qwen3Config (nothing downloaded). One row: a prompt of
`--prompt` tokens and a response of L tokens, temperature 0.7. Each figure is one call in
a fresh subprocess, after a 32-token warm-up call:
  CPU   growth of the peak RSS over the RSS just before the call (VmHWM, reset through
        /proc/self/clear_refs; tracemalloc does not see torch's allocations);
  CUDA  torch.cuda.max_memory_allocated over memory_allocated just before the call.
"backward" calls `.backward()` on Σ log π (+ Σ entropy when entropy is on).
An old-path call is skipped ("not measured") when the memory it needs, extrapolated from
the previous length (or 8 x one [P+L, V] float32 tensor for the first), exceeds what is
free less 1 GiB or `--max-gib`; on CPU each child's address space is capped at that bound,
so an underestimate fails ("failed") instead of pushing the machine out of memory.

`--device cuda` adds one student update step of a randomly initialised Qwen3-1.7B-shaped
model (its config values; bf16, gradient checkpointing, AdamW) on one response of
`--update-length` tokens: clipped surrogate, backward, clip, optimiser step; peak memory
(absolute) and tokens/s after one warm-up step, old and new. Without CUDA it exits with 2.
Prints a Markdown table and one JSON line.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from anywhere

from gropd.loss import clipped_policy_loss
from gropd.model.logprobs import PackedBatch, pack, response_logprobs

VOCAB = 151_936
TEMPERATURE = 0.7
GIB = 2**30
QWEN3_1_7B = dict(  # Qwen/Qwen3-1.7B config.json
    vocab_size=VOCAB,
    hidden_size=2048,
    intermediate_size=6144,
    num_hidden_layers=28,
    num_attention_heads=16,
    num_key_value_heads=8,
    head_dim=128,
    max_position_embeddings=40960,
    rope_theta=1_000_000.0,
    rms_norm_eps=1e-6,
    tie_word_embeddings=True,
)
TINY_BODY = dict(
    vocab_size=VOCAB,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    max_position_embeddings=16384,
    tie_word_embeddings=True,
)


def old_response_logprobs(
    model: torch.nn.Module, batch: PackedBatch, temperature: float = 1.0, with_entropy: bool = False
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The implementation before the chunked LM head, kept here as the reference: logits at every
    position, a float32 copy, a full log-softmax `[B, P+T, V]` and its exp for the entropy."""
    width, length = batch.prompt_width, batch.response_ids.shape[1]
    logits = model(
        input_ids=batch.input_ids, attention_mask=batch.attention_mask, position_ids=batch.position_ids
    ).logits
    logits = logits[:, width - 1 : width - 1 + length].float() / temperature
    log_probs = torch.log_softmax(logits, dim=-1)
    chosen = log_probs.gather(-1, batch.response_ids.unsqueeze(-1)).squeeze(-1) * batch.response_mask
    if not with_entropy:
        return chosen, None
    entropy = -(log_probs.exp() * log_probs).sum(-1) * batch.response_mask
    return chosen, entropy


IMPLS = {"old": old_response_logprobs, "new": response_logprobs}
SHAPES = {"qwen3-1.7b": QWEN3_1_7B, "tiny-body": TINY_BODY}


def build_model(shape: dict, device: torch.device, dtype: torch.dtype) -> torch.nn.Module:
    from transformers import Qwen3Config, Qwen3ForCausalLM

    torch.manual_seed(0)
    with device:
        return Qwen3ForCausalLM(Qwen3Config(**shape, use_cache=False)).to(dtype)


def random_row(prompt: int, length: int, device: torch.device, seed: int = 0) -> PackedBatch:
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, VOCAB, (prompt + length,), generator=gen).tolist()
    return pack([ids[:prompt]], [ids[prompt:]], 0, device)


def proc_status_bytes(key: str) -> int:
    """One `/proc/self/status` field (VmRSS, VmHWM, VmSize) in bytes."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) * 1024
    raise KeyError(key)


def available_bytes() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    raise KeyError("MemAvailable")


def call(spec: dict, model: torch.nn.Module, batch: PackedBatch) -> None:
    """One response_logprobs call as `spec` says (impl, entropy, backward)."""
    fn = IMPLS[spec["impl"]]
    with torch.set_grad_enabled(spec["backward"]):
        chosen, entropy = fn(model, batch, TEMPERATURE, spec["entropy"])
        if spec["backward"]:
            (chosen.sum() + (entropy.sum() if entropy is not None else 0.0)).backward()


def start_peak(device: torch.device) -> int:
    """Reset the peak-memory counter; return the memory in use now (bytes)."""
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        return torch.cuda.memory_allocated()
    Path("/proc/self/clear_refs").write_text("5")  # peak RSS := current RSS
    return proc_status_bytes("VmRSS")


def read_peak(device: torch.device) -> int:
    """Peak memory (bytes) since start_peak: allocated on CUDA, resident on CPU."""
    if device.type == "cuda":
        torch.cuda.synchronize()
        return torch.cuda.max_memory_allocated()
    return proc_status_bytes("VmHWM")


def measure_call(spec: dict) -> dict:
    """Child process: peak memory growth (bytes) and seconds of one call; see the module doc."""
    device = torch.device(spec["device"])
    model = build_model(TINY_BODY, device, torch.float32)
    call(spec, model, random_row(spec["prompt"], 32, device, seed=1))  # warm-up
    model.zero_grad(set_to_none=True)
    batch = random_row(spec["prompt"], spec["length"], device)
    before = start_peak(device)
    started = time.perf_counter()
    call(spec, model, batch)
    peak = read_peak(device)
    return {"peak_growth_bytes": peak - before, "seconds": time.perf_counter() - started}


def measure_update(spec: dict) -> dict:
    """Child process: one student update step (module doc); `spec["shape"]` names the body,
    "qwen3-1.7b" for the paper's (the tiny body only checks this code on a CPU)."""
    device = torch.device(spec["device"])
    model = build_model(SHAPES[spec["shape"]], device, torch.bfloat16)
    model.gradient_checkpointing_enable()
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6)
    batch = random_row(spec["prompt"], spec["length"], device)
    advantages = torch.randn(batch.response_ids.shape, generator=torch.Generator().manual_seed(2)).to(device)

    def step() -> None:
        logp, _ = IMPLS[spec["impl"]](model, batch, TEMPERATURE)
        loss, _ = clipped_policy_loss(logp, logp.detach(), advantages, batch.response_mask, 0.2, 0.28, "token-mean")
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    step()  # warm-up; allocates the optimiser state
    start_peak(device)
    started = time.perf_counter()
    step()
    peak = read_peak(device)
    seconds = time.perf_counter() - started
    return {
        "peak_bytes": peak,
        "seconds": seconds,
        "tokens_per_s": (spec["prompt"] + spec["length"]) / seconds,
        "response_tokens_per_s": spec["length"] / seconds,
    }


def run_child(spec: dict, limit_bytes: int | None, threads: int) -> dict:
    """`spec` measured in a fresh interpreter; {"error": ...} when it fails."""
    command = [sys.executable, __file__, "--child", json.dumps(spec), "--threads", str(threads)]
    if limit_bytes is not None:
        command += ["--limit-bytes", str(limit_bytes)]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        return {"error": (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def child_main(spec: dict, threads: int, limit_bytes: int | None) -> None:
    torch.set_num_threads(threads)
    if limit_bytes is not None:
        cap = proc_status_bytes("VmSize") + limit_bytes
        resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    result = measure_update(spec) if spec.get("kind") == "update" else measure_call(spec)
    print(json.dumps(result))


def free_bytes(device: str) -> int:
    return torch.cuda.mem_get_info()[0] if device == "cuda" else available_bytes()


def guarded_run(spec: dict, need: float | None, threads: int, max_bytes: float | None) -> dict:
    """run_child, unless `need` bytes (an estimate; None = no check) exceed what is free less
    1 GiB or `max_bytes`; on CPU the child's address space is capped at the smaller of the two."""
    free = free_bytes(spec["device"])
    cap = free - GIB if max_bytes is None else min(free - GIB, max_bytes)
    if need is not None and need > cap:
        return {"error": f"not measured: needs ~{need / GIB:.1f} GiB, allowed {cap / GIB:.1f} GiB"}
    return run_child(spec, None if spec["device"] == "cuda" else int(cap), threads)


def sweep(args: argparse.Namespace) -> list[dict]:
    """Every (length, entropy, backward, impl) in a fresh child; old calls guarded (module doc)."""
    rows, last_old = [], {}  # (entropy, backward) -> (P+L, growth) of the last measured old call
    max_bytes = None if args.max_gib is None else args.max_gib * GIB
    for length in args.lengths:
        tokens = args.prompt + length
        for entropy, backward in [(False, False), (False, True), (True, False), (True, True)]:
            row = {"length": length, "entropy": entropy, "backward": backward, "one_TV_fp32_bytes": tokens * VOCAB * 4}
            for impl in args.impls:
                spec = {"impl": impl, "length": length, "prompt": args.prompt, "device": args.device}
                spec |= {"entropy": entropy, "backward": backward}
                need = None
                if impl == "old":
                    last = last_old.get((entropy, backward))
                    need = 8 * row["one_TV_fp32_bytes"] if last is None else last[1] * tokens / last[0]
                row[impl] = guarded_run(spec, need, args.threads, max_bytes)
                if impl == "old" and "peak_growth_bytes" in row[impl]:
                    last_old[(entropy, backward)] = (tokens, row[impl]["peak_growth_bytes"])
            print(json.dumps(row), file=sys.stderr, flush=True)
            rows.append(row)
    return rows


def cell(result: dict | None) -> str:
    if result is None:
        return "-"
    if "error" in result:
        return "not measured" if result["error"].startswith("not measured") else "failed"
    return f"{result['peak_growth_bytes'] / 1e9:.2f} GB / {result['seconds']:.1f} s"


def print_table(rows: list[dict], impls: list[str]) -> None:
    print(
        "| response tokens | entropy | backward | "
        + " | ".join(f"{i} (peak growth / time)" for i in impls)
        + " | one [P+L, V] fp32 |"
    )
    print("|---|---|---|" + "---|" * len(impls) + "---|")
    for r in rows:
        cells = " | ".join(cell(r.get(i)) for i in impls)
        flags = f"{'yes' if r['entropy'] else 'no'} | {'yes' if r['backward'] else 'no'}"
        print(f"| {r['length']:,} | {flags} | {cells} | {r['one_TV_fp32_bytes'] / 1e9:.2f} GB |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", type=int, nargs="+", default=[2048, 4096, 8192])
    parser.add_argument("--prompt", type=int, default=256)
    parser.add_argument("--impls", nargs="+", choices=list(IMPLS), default=list(IMPLS))
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--update-length", type=int, default=8192)
    parser.add_argument(
        "--max-gib", type=float, help="most memory one measurement may use (default: all free but 1 GiB)"
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--limit-bytes", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child_main(json.loads(args.child), args.threads, args.limit_bytes)
        return
    if args.device == "cuda" and not torch.cuda.is_available():
        print(f"--device cuda: CUDA is not available here (torch {torch.__version__})", file=sys.stderr)
        sys.exit(2)
    rows = sweep(args)
    print_table(rows, args.impls)
    report = {"benchmark": "logprob_memory", "device": args.device, "prompt": args.prompt, "rows": rows}
    if args.device == "cuda":
        update = {}
        for impl in args.impls:
            spec = {"kind": "update", "shape": "qwen3-1.7b", "device": "cuda", "impl": impl}
            spec |= {"prompt": args.prompt, "length": args.update_length}
            update[impl] = run_child(spec, None, args.threads)
            print(f"update step, {impl}: {json.dumps(update[impl])}")
        report["update_step"] = update
    print(json.dumps(report))


if __name__ == "__main__":
    main()

"""The real trainer at the paper's shapes on one GPU, without vLLM: `gropd.cli run` of table1's first GR-OPD run for
STEPS rollout batches, then its evaluation, under `accelerate launch` (1 process, FSDP2), nothing to download.

    python benchmarks/trainer_rehearsal.py [--device cuda] [--shape paper|tiny] [--length 1024] [--keep DIR]

What runs is the rehearsal profile's code path (experiments/profiles/rehearsal.yaml: the paper's bf16 compute
over float32 masters, π_S,old recomputed, gradient checkpointing, per-device batch 1 with accumulation) with:
    models    random Qwen3 weights in Qwen3-1.7B (student, I1.7) and Qwen3-4B (teacher, I4) shapes, Qwen3's
              vocabulary of 151,936, the tiny world's tokenizer (benchmarks/random_models.py; gpu_check's SHAPES),
              built by a process of their own that exits before the run starts, so nothing it cached on the
              device is counted in the run's peak
    engines   transformers for rollouts (backend.rollout=hf) and for the teacher in the same process
              (backend.teacher=hf) in place of vLLM, which cannot be brought to every GPU machine
    forwards  the paper's (experiments/train.yaml): backend.max_tokens_per_forward 32,768 and backend.threads
              unset, not the CPU rehearsal's 200 tokens on 1 thread; a batch of 32 responses of --length 1,024
              tokens holds one full 32,768-token no-grad forward, the largest activation outside the update
    launch    experiments/launch/eight_gpu_fsdp.yaml with 1 process (cpu_fsdp.yaml on a CPU)
    sizes     SIZES[shape]: a random model never stops, so every response is --length tokens long
    eval      the real evaluation path (its own process, the trained weights) on EVAL_QUESTIONS questions of
              two tiny suites, responses of at most --eval-length tokens
    disk      a scratch folder in the current directory (the checkpoint of a 1.7B with its AdamW state is ~21 GB:
              $TMPDIR is often small, or memory), removed at the end unless --keep names one

Prints a row per step and phase (rollout, teacher, update: response tokens/s and torch's peak GiB of the phase,
as the trainer logs them), the models' build, the run's start-up and saving (the rest of the training command),
the evaluation's seconds, the whole command's seconds against BUDGET_S and the device's peak (all processes,
sampled), each step's trainer peak with the engines excluded (`memory_trainer_gib`) beside gropd/model/fit.py's
estimate for the same shapes (`memory_trainer_estimate_gib`), then one JSON line; exits 1 unless the run finished
with its evaluation and, on a GPU, every step's trainer peak is within MEMORY_MARGIN (10%) of the estimate
(gropd/train/device_memory.py over_estimate). Budget: 5 minutes on one H100,
an estimate (never run on a GPU yet): its rows say which phase overran.
`--device cpu --shape tiny --length 16` is the suite's run of it (tests/test_benchmarks.py), in seconds.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # `python benchmarks/trainer_rehearsal.py` without an editable install
    sys.path.insert(0, str(REPO))

from benchmarks.gpu_check import SHAPES, DevicePeak  # noqa: E402
from benchmarks.random_models import point_rehearsal_models, write_random_models  # noqa: E402
from gropd.train.device_memory import MEMORY_MARGIN, over_estimate  # noqa: E402

RUN_ID = "table1__I4nothink-I1.7nothink__gropd"
STEPS = 2
SIZES = {  # prompts x G responses a rollout batch; grad_accum responses an optimiser step (per-device batch 1)
    "paper": {"prompts": 4, "group": 8, "accum": 8},  # 32 responses, 4 optimiser steps a batch
    "tiny": {"prompts": 2, "group": 4, "accum": 4},
}
EVAL_QUESTIONS, EVAL_SUITES = 2, "[add,mul]"
LAUNCH = {"cuda": "experiments/launch/eight_gpu_fsdp.yaml", "cpu": "experiments/launch/cpu_fsdp.yaml"}
PHASES = ("rollout", "teacher", "update")
BUDGET_S = 300.0
PAPER_BACKEND = yaml.safe_load((REPO / "experiments/train.yaml").read_text())["backend"]  # the paper's defaults


def overrides(device: str, shape: str, length: int, eval_length: int) -> list[str]:
    """The rehearsal profile's keys this command changes (module docstring)."""
    size = SIZES[shape]
    return [
        f"backend.device={device}",
        "backend.rollout=hf",
        "backend.teacher=hf",
        f"train.prompts_per_batch={size['prompts']}",
        f"train.group_size={size['group']}",
        "train.per_device_batch=1",
        f"train.grad_accum={size['accum']}",
        "train.replicas=1",
        f"train.minibatch_responses={size['accum']}",
        f"train.steps={STEPS}",
        f"train.checkpoint_every={STEPS}",
        f"sampling.max_new_tokens={length}",
        f"eval.questions={EVAL_QUESTIONS}",
        f"eval.suites={EVAL_SUITES}",
        f"eval.sampling.nothink.max_new_tokens={eval_length}",
        f"backend.max_tokens_per_forward={PAPER_BACKEND['max_tokens_per_forward']}",
        f"backend.threads={'null' if PAPER_BACKEND['threads'] is None else PAPER_BACKEND['threads']}",
    ]


def build_models(scratch: Path, device: str, shape: str, length: int) -> None:
    """write_models in a process of its own: what it leaves cached on the device goes with it."""
    argv = [sys.executable, str(Path(__file__).resolve()), "--models-only", "--device", device, "--shape", shape]
    argv += ["--length", str(length), "--keep", str(scratch)]
    subprocess.run(argv, check=True, env={**os.environ, "PYTHONPATH": str(REPO)})


def write_models(scratch: Path, device: str, shape: str, length: int) -> None:
    """The student and teacher in `shape` (bf16 files at the paper's shapes), the rehearsal profile pointed at them."""
    numbers = SHAPES[shape]
    shapes = {label: {**numbers[role], **numbers["common"]} for label, role in (("I1.7", "student"), ("I4", "teacher"))}
    dtype = "bfloat16" if shape == "paper" else "float32"
    folders = write_random_models(scratch, shapes, dtype=dtype, device=device, max_positions=max(4096, length + 1024))
    point_rehearsal_models(scratch, folders)


def launch(scratch: Path, device: str, settings: list[str], log: Path) -> subprocess.Popen:
    argv = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(REPO / LAUNCH[device])]
    argv += ["--num_processes", "1", "-m", "gropd.cli", "--results", str(scratch / "results")]
    argv += ["run", RUN_ID, "--profile", "rehearsal", *settings]
    path = os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path, "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(argv, cwd=scratch, stdout=log.open("w"), stderr=subprocess.STDOUT, env=env)


def trained_at(process: subprocess.Popen, status_path: Path, timeout: float) -> float | None:
    """Wait for the command; the monotonic time its status first read `trained` or `finished` (training over),
    polled every 0.2 s; None if it never did."""
    deadline, seen = time.monotonic() + timeout, None
    while process.poll() is None:
        if time.monotonic() > deadline:
            process.kill()
            raise TimeoutError(f"the run did not end within {timeout:.0f} s")
        if seen is None and status_path.exists():
            try:
                if json.loads(status_path.read_text()).get("status") in ("trained", "finished"):
                    seen = time.monotonic()
            except ValueError:  # caught mid-replace
                pass
        time.sleep(0.2)
    return seen


def phase_rows(records: list[dict], responses: int) -> list[dict]:
    """A row per step and phase: response tokens, seconds, tokens/s and torch's peak GiB of the phase."""
    rows = []
    for record in records:
        tokens = round(record["mean_response_len"] * responses)
        for phase in PHASES:
            seconds = record[f"time_{phase}_s"]
            rows.append(
                {
                    "phase": f"{phase} step {record['step']}",
                    "tokens": tokens,
                    "seconds": seconds,
                    "tokens_per_s": tokens / seconds,
                    "peak_torch_gib": record.get(f"memory_{phase}_gib"),
                }
            )
    return rows


def memory_checks(records: list[dict]) -> list[dict]:
    """Per step, the trainer's own peak (engines excluded: `memory_trainer_gib`, gropd/train/device_memory.py)
    beside fit.py's estimate for the same shapes, and whether it stays within MEMORY_MARGIN of it (`problem`:
    over_estimate's line, or None). No rows where the trainer measures none (a CPU)."""
    checks = []
    for record in records:
        measured, estimate = record.get("memory_trainer_gib"), record.get("memory_trainer_estimate_gib")
        if measured is None or estimate is None:
            continue
        problem = over_estimate(measured, estimate)
        checks.append({"step": record["step"], "measured_gib": measured, "estimate_gib": estimate, "problem": problem})
    return checks


def print_row(result: dict) -> None:
    peak = result.get("peak_torch_gib")
    tokens = result.get("tokens")
    rate = result.get("tokens_per_s")
    print(
        f"{result['phase']:<20} {tokens if tokens is not None else '':>7} {result['seconds']:>8.2f} "
        f"{f'{rate:.0f}' if rate is not None else '':>10} {f'{peak:.1f}' if peak is not None else '':>10}",
        flush=True,
    )


def rehearse(scratch: Path, device: str, shape: str, length: int, eval_length: int, timeout: float) -> dict:
    """Build the models, run the command, read what it wrote; the figures as one dict (`ok`: the run finished
    with an evaluation summary)."""
    started = time.monotonic()
    build_models(scratch, device, shape, length)
    built = time.monotonic()
    run_dir = scratch / "results" / "rehearsal" / RUN_ID
    log = scratch / "run.log"
    with DevicePeak(device) as meter:
        process = launch(scratch, device, overrides(device, shape, length, eval_length), log)
        trained = trained_at(process, run_dir / "status.json", timeout)
    ended = time.monotonic()
    status = json.loads((run_dir / "status.json").read_text()) if (run_dir / "status.json").exists() else {}
    records = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()] if status else []
    size = SIZES[shape]
    rows = phase_rows(records, size["prompts"] * size["group"])
    evaluated = (run_dir / "eval" / "summary.json").exists()
    rows.insert(0, {"phase": "models (own process)", "seconds": built - started})
    if trained is not None:
        steps_s = sum(row["seconds"] for row in rows[1:])
        rows.append({"phase": "start-up and saving", "seconds": trained - built - steps_s})
        rows.append({"phase": "evaluation", "seconds": ended - trained})
    rows.append({"phase": "whole command", "seconds": ended - started})
    memory = memory_checks(records)
    ok = process.returncode == 0 and status.get("status") == "finished" and len(records) == STEPS and evaluated
    ok = ok and (device != "cuda" or len(memory) == STEPS) and not any(check["problem"] for check in memory)
    return {
        "benchmark": "trainer_rehearsal",
        "shape": shape,
        "device": device,
        "length": length,
        "models_s": built - started,
        "peak_device_gib": meter.peak_device,
        "rows": rows,
        "memory": memory,
        "memory_margin": MEMORY_MARGIN,
        "status": status.get("status"),
        "reason": status.get("reason"),
        "ok": ok,
        "budget_s": BUDGET_S,
        "within_budget": ended - started <= BUDGET_S,
        "log": str(log),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda", choices=sorted(LAUNCH))
    parser.add_argument("--shape", default="paper", choices=sorted(SHAPES))
    parser.add_argument("--length", type=int, default=1024, help="response tokens of each rollout")
    parser.add_argument("--eval-length", type=int, default=256, help="response tokens at most in the evaluation")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds for the run and its evaluation")
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it (default: one in the current one)")
    parser.add_argument("--models-only", action="store_true", help=argparse.SUPPRESS)  # build_models' child
    args = parser.parse_args()
    if args.models_only:
        write_models(args.keep, args.device, args.shape, args.length)
        return
    scratch = args.keep or Path(tempfile.mkdtemp(prefix="trainer-rehearsal-", dir=Path.cwd()))
    scratch.mkdir(parents=True, exist_ok=True)
    try:
        print(f"trainer_rehearsal: {args.shape} shapes on {args.device}, {args.length}-token responses, in {scratch}")
        figures = rehearse(scratch, args.device, args.shape, args.length, args.eval_length, args.timeout)
        print(f"{'phase':<20} {'tokens':>7} {'seconds':>8} {'tokens/s':>10} {'torch GiB':>10}")
        for result in figures["rows"]:
            print_row(result)
        peak = "n/a" if figures["peak_device_gib"] is None else f"{figures['peak_device_gib']:.1f} GiB"
        whole = figures["rows"][-1]["seconds"]
        for check in figures["memory"]:
            print(
                f"trainer memory step {check['step']}: {check['measured_gib']:.2f} GiB measured (engines excluded), "
                f"{check['estimate_gib']:.2f} GiB by gropd/model/fit.py, at most {MEMORY_MARGIN:.0%} over: "
                + (check["problem"] or "within")
            )
        verdict = "within" if figures["within_budget"] else "OVER"
        print(f"whole command {whole:.0f} s: {verdict} the {BUDGET_S:.0f}-second budget; device peak {peak}")
        problems = [check["problem"] for check in figures["memory"] if check["problem"]]
        if problems:
            print("FAILED: " + "; ".join(problems))
        elif not figures["ok"]:
            tail = Path(figures["log"]).read_text().strip().splitlines()[-20:]
            print("FAILED: run status " + repr(figures["status"]) + "; the log's last lines:\n" + "\n".join(tail))
        print(json.dumps(figures))
    finally:
        if args.keep is None:
            shutil.rmtree(scratch, ignore_errors=True)
    sys.exit(0 if figures["ok"] else 1)


if __name__ == "__main__":
    main()

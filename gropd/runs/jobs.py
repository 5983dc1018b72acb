"""`--jobs N`: a grid's runs N at a time, each in its own `python -m gropd.cli run RUN_ID` process.

Each process gets the grid's command-line overrides (and --force) plus `backend.threads=T` unless they set it
themselves (gropd/runs/lifecycle.py: T = cores // N for runs not started yet; a started run keeps its own),
OMP_NUM_THREADS=T, and on CUDA one GPU, round-robin over the visible ones
(CUDA_VISIBLE_DEVICES). A run is a single process here; the paper profile's multi-GPU runs
use their own launchers (experiments/launch/), which --jobs does not pack.

Output: every line a run prints, prefixed by its run id. A failed or collapsed run does not
stop the others; at the end a summary names each run's outcome, and the exit status is 1
when any run failed (its process exited non-zero). A run already finished or collapsed starts no
process (a grid whose runs are all done says so in seconds).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from gropd.config import RunConfig
from gropd.config.errors import ConfigError, RunFileError
from gropd.record.run_dir import DONE, RunDir
from gropd.runs.lifecycle import split_threads, usable_cores
from gropd.runs.plan import RunPlan

POLL_S = 0.2


@dataclass
class Job:
    """One run's process: its command, the environment it adds, and (once done) how it ended."""

    run_id: str
    threads: int | None
    command: list[str]
    env: dict[str, str]
    returncode: int | None = None
    tail: deque[str] = field(default_factory=lambda: deque(maxlen=3))


def visible_gpus() -> list[str]:
    """GPU ids the runs may use: CUDA_VISIBLE_DEVICES when set, else every CUDA device."""
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        return [gpu.strip() for gpu in listed.split(",") if gpu.strip()]
    import torch

    return [str(index) for index in range(torch.cuda.device_count())]


def uses_cuda(config: RunConfig, gpus: list[str]) -> bool:
    return config.backend.device == "cuda" or (config.backend.device == "auto" and bool(gpus))


def plan_jobs(
    plans: list[RunPlan],
    *,
    jobs: int,
    overrides: list[str],
    force: bool,
    results_root: Path,
    cores: int,
    gpus: list[str],
) -> list[Job]:
    """One Job per run plan (its thread count under --jobs: RunPlan.with_split, gropd/runs/lifecycle.py's rule)."""
    split, planned, cuda_runs = split_threads(cores, jobs), [], 0
    for plan in plans:
        config = plan.with_split(results_root, split).config
        threads = config.backend.threads
        env = {"PYTHONUNBUFFERED": "1"} | ({"OMP_NUM_THREADS": str(threads)} if threads else {})
        if uses_cuda(config, gpus):
            env["CUDA_VISIBLE_DEVICES"] = gpus[cuda_runs % len(gpus)]
            cuda_runs += 1
        run = ["run", config.run_id, "--profile", config.profile, *overrides]
        command = [sys.executable, "-m", "gropd.cli", "--results", str(results_root), *run]
        if plan.origin("backend.threads") != "command line":  # else the overrides carry it (a key is given once)
            command += [f"backend.threads={'null' if threads is None else threads}"]
        command += ["--force"] if force else []
        planned.append(Job(config.run_id, threads, command, env))
    return planned


def run_jobs(planned: list[Job], parallel: int, out: TextIO) -> list[Job]:
    """Run the jobs, at most `parallel` at once, streaming each one's lines prefixed by its run id.
    Ctrl-C stops the running processes and starts no more."""
    pending, running = list(planned), []
    lock = threading.Lock()
    try:
        while pending or running:
            while pending and len(running) < parallel:
                job = pending.pop(0)
                process = subprocess.Popen(
                    job.command,
                    env={**os.environ, **job.env},
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                    errors="replace",
                )
                reader = threading.Thread(target=_stream, args=(job, process, out, lock), daemon=True)
                reader.start()
                running.append((job, process, reader))
            for entry in [entry for entry in running if entry[1].poll() is not None]:
                job, process, reader = entry
                reader.join()
                job.returncode = process.returncode
                running.remove(entry)
            time.sleep(POLL_S)
    except KeyboardInterrupt:
        for _, process, _ in running:
            process.terminate()
        for _, process, _ in running:
            process.wait()
        raise
    return planned


def _stream(job: Job, process: subprocess.Popen, out: TextIO, lock: threading.Lock) -> None:
    """Pass the job's lines to `out`, prefixed; once `out` is gone (a closed pipe: `| head`), keep reading them
    (the tail only), so that the job never blocks writing to a full pipe: it runs on, logging to its run's files."""
    prefix, gone = f"[{job.run_id}]", False
    for line in process.stdout:
        line = line.rstrip("\n")
        job.tail.append(line)
        if gone:
            continue
        try:
            with lock:
                print(line if line.startswith(prefix) else f"{prefix} {line}", file=out, flush=True)
        except (BrokenPipeError, ValueError):  # the reader closed the pipe (ValueError: `out` closed here)
            gone = True


def outcome(job: Job, results_root: Path, profile: str) -> str:
    """finished / collapsed / failed (exit N): the job's exit status, and its status.json when it exited 0."""
    if job.returncode:
        return f"failed (exit {job.returncode})"
    try:
        status = RunDir.at(results_root, profile, job.run_id).read_status() or {}
    except RunFileError as err:
        return f"exited 0, but {err}"
    return str(status.get("status", "done"))


def run_grid_jobs(
    plans: list[RunPlan],
    states: list[str],
    *,
    jobs: int,
    overrides: list[str],
    force: bool,
    dry_run: bool,
    results_root: Path,
    out: TextIO = sys.stderr,
) -> int:
    """`gropd.cli grid --jobs N`: plan, say what was chosen, run, summarise; 1 when any run failed.
    `states`: each run's pipeline.planned_state; a finished or collapsed one starts no process."""
    if os.environ.get("WORLD_SIZE", "1") != "1":
        raise ConfigError(
            "command line",
            "--jobs",
            f"{jobs} inside a {os.environ['WORLD_SIZE']}-process launch",
            "--jobs only without a distributed launcher (multi-GPU runs use experiments/launch/)",
        )
    cores, gpus = usable_cores(), visible_gpus()
    configs = [plan.config for plan in plans]
    planned = plan_jobs(
        plans,
        jobs=jobs,
        overrides=overrides,
        force=force,
        results_root=results_root,
        cores=cores,
        gpus=gpus,
    )
    print(
        f"--jobs {jobs} on {cores} cores{f' and GPUs {gpus}' if gpus else ''}: backend.threads="
        f"{split_threads(cores, jobs)} for runs not started (N x threads <= cores); started runs keep theirs",
        file=out,
    )
    vllm_on_gpus = [c for c in configs if uses_cuda(c, gpus) and "vllm" in (c.backend.rollout, c.backend.teacher)]
    if vllm_on_gpus and min(jobs, len(vllm_on_gpus)) > len(gpus):
        print(
            f"warning: up to {min(jobs, len(vllm_on_gpus))} runs with vLLM engines would share {len(gpus)} GPU(s); "
            "each engine reserves a fixed share of its GPU's memory, so use --jobs <= the GPU count",
            file=out,
        )
    for state, job in zip(states, planned, strict=True):
        gpu = f", CUDA_VISIBLE_DEVICES={job.env['CUDA_VISIBLE_DEVICES']}" if "CUDA_VISIBLE_DEVICES" in job.env else ""
        print(f"  {job.run_id}: {state}, backend.threads={job.threads}{gpu}", file=out)
    if dry_run:
        return 0
    run_jobs([job for state, job in zip(states, planned, strict=True) if state not in DONE], jobs, out)
    print(f"summary of {len(planned)} runs:", file=out)
    for config, job in zip(configs, planned, strict=True):
        last = f" -- {job.tail[-1]}" if job.returncode and job.tail else ""
        print(f"  {outcome(job, results_root, config.profile):<18} {job.run_id}{last}", file=out)
    failed = [job.run_id for job in planned if job.returncode]
    if failed:
        print(f"{len(failed)} run(s) failed: {', '.join(failed)}", file=out)
    return 1 if failed else 0

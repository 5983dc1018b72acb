"""Seconds per phase per training step (rollout, teacher scoring, credit + update) for each
tiny pairing, from real runs of the trainer on the tiny world.

    python benchmarks/train_step.py [--steps 6] [--method gropd] [--profile tiny] [--pairing P ...] [--pins NAME]

Runs `steps` rollout batches per pairing (every pairing the profile has the models for, or those named) in a
temporary results directory (the first step is dropped as warm-up) and prints a table and one JSON line; `wall` and
`cpu` are the whole run's seconds (loading and the warm-up included), `cpu` this process's CPU time (its grading
workers' not counted), the figure to read on a shared machine. The trainer is called directly, so the process
computes under whatever numerics its environment pins; `--pins` sets a pin set (gropd/numerics.py PIN_SETS) before
torch loads, and the JSON line records the variables in force.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

from gropd.cli import quiet_libraries
from gropd.config import load_manifests
from gropd.numerics import PIN_SETS, PINNED, aten_capability, pin_set
from gropd.record.run_dir import RunDir
from gropd.runs.pipeline import load_run, open_run_dir

PHASES = ("time_rollout_s", "time_teacher_s", "time_update_s")


def measure(pairing: str, method: str, steps: int, results: Path, profile: str = "tiny") -> dict[str, float]:
    from gropd.train.loop import train_run  # loads torch: after main has set the pins

    manifests = load_manifests(Path("experiments"))
    config = load_run(manifests, profile, f"table1__{pairing}__{method}", [f"train.steps={steps}"])
    run_dir = RunDir(results / pairing)
    open_run_dir(config, manifests, run_dir)
    started, cpu_started = time.perf_counter(), time.process_time()
    train_run(config, manifests, run_dir)
    rows = run_dir.read_metrics()[1:]
    figures = {phase: statistics.mean(r[phase] for r in rows) for phase in PHASES}
    figures["mean_response_len"] = statistics.mean(r["mean_response_len"] for r in rows)
    figures["wall_s"] = time.perf_counter() - started
    figures["cpu_s"] = time.process_time() - cpu_started  # this process's CPU time, every step and loading included
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--method", default="gropd", choices=["gropd", "opd"])
    parser.add_argument("--profile", default="tiny")
    parser.add_argument("--pairing", action="append", help="a pairing to time (repeatable); default: every one")
    parser.add_argument("--pins", choices=list(PIN_SETS), help="set these variables before torch loads")
    args = parser.parse_args()
    if args.pins:
        os.environ.update(pin_set(args.pins))
    quiet_libraries()
    manifests = load_manifests(Path("experiments"))
    pairings = args.pairing or [
        name for name in manifests.pairings if not manifests.lacks(args.profile, {"pairing": name})
    ]
    table = {}
    with tempfile.TemporaryDirectory() as tmp:
        for pairing in pairings:
            table[pairing] = measure(pairing, args.method, args.steps, Path(tmp), args.profile)
    pinned = {name: os.environ.get(name) for name in PINNED}
    print(f"pins {args.pins or 'as the environment has them'}: {pinned}, ATen {aten_capability()}")
    print(f"{'pairing':<26} {'rollout':>8} {'teacher':>8} {'update':>8} {'len':>6} {'wall':>6} {'cpu':>6}")
    for pairing, f in table.items():
        print(
            f"{pairing:<26} {f['time_rollout_s']:8.3f} {f['time_teacher_s']:8.3f} {f['time_update_s']:8.3f} "
            f"{f['mean_response_len']:6.1f} {f['wall_s']:6.1f} {f['cpu_s']:6.1f}"
        )
    figures = {"benchmark": "train_step", "profile": args.profile, "method": args.method, "steps": args.steps}
    print(json.dumps(figures | {"pins": args.pins, "pinned": pinned, "aten": aten_capability(), "pairings": table}))


if __name__ == "__main__":
    main()

"""Seconds per phase per training step (rollout, teacher scoring, credit + update) for each
tiny pairing, from real runs of the trainer on the tiny world.

    python benchmarks/train_step.py [--steps 6] [--method gropd] [--profile tiny] [--pairing NAME ...]

Runs `steps` rollout batches per pairing (every pairing the profile has the models for, or those
named) in a temporary results directory (the first step is dropped as warm-up) and prints a table
and one JSON line.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from gropd.cli import quiet_libraries
from gropd.config import load_manifests
from gropd.record.run_dir import RunDir
from gropd.runs.pipeline import load_run, open_run_dir
from gropd.train.loop import train_run

PHASES = ("time_rollout_s", "time_teacher_s", "time_update_s")


def measure(pairing: str, method: str, steps: int, results: Path, profile: str = "tiny") -> dict[str, float]:
    manifests = load_manifests(Path("experiments"))
    config = load_run(manifests, profile, f"table1__{pairing}__{method}", [f"train.steps={steps}"])
    run_dir = RunDir(results / pairing)
    open_run_dir(config, manifests, run_dir)
    started = time.perf_counter()
    train_run(config, manifests, run_dir)
    rows = run_dir.read_metrics()[1:]
    figures = {phase: statistics.mean(r[phase] for r in rows) for phase in PHASES}
    figures["mean_response_len"] = statistics.mean(r["mean_response_len"] for r in rows)
    figures["wall_s"] = time.perf_counter() - started
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--method", default="gropd", choices=["gropd", "opd"])
    parser.add_argument("--profile", default="tiny")
    parser.add_argument("--pairing", action="append", help="a pairing to time (repeatable); default: every one")
    args = parser.parse_args()
    quiet_libraries()
    manifests = load_manifests(Path("experiments"))
    pairings = args.pairing or [
        name for name in manifests.pairings if not manifests.lacks(args.profile, {"pairing": name})
    ]
    table = {}
    with tempfile.TemporaryDirectory() as tmp:
        for pairing in pairings:
            table[pairing] = measure(pairing, args.method, args.steps, Path(tmp), args.profile)
    print(f"{'pairing':<26} {'rollout':>8} {'teacher':>8} {'update':>8} {'len':>6} {'wall':>6}")
    for pairing, f in table.items():
        print(
            f"{pairing:<26} {f['time_rollout_s']:8.3f} {f['time_teacher_s']:8.3f} {f['time_update_s']:8.3f} "
            f"{f['mean_response_len']:6.1f} {f['wall_s']:6.1f}"
        )
    print(
        json.dumps(
            {"benchmark": "train_step", "profile": args.profile, "method": args.method, "steps": args.steps}
            | {"pairings": table}
        )
    )


if __name__ == "__main__":
    main()

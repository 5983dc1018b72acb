"""Compare the runs two results directories share, bit for bit: every metric of every step (wall-clock timings
aside) and every number of the evaluation summary. How a reviewer checks that their machine gave the committed
numbers (README, Reproducibility). One named exception: the monitoring correlations that runs made before
gropd/train/correlation.py computed through a per-CPU library are compared within a tolerance and reported as
their own class (gropd/record/record_compare.py says which keys, the tolerance and why).

    python tools/compare_runs.py MINE THEIRS [--profile tiny]     e.g. results results/reference

Prints one line a run (identical; identical in training and evaluation with the monitoring class named; or its
first difference) and exits 1 when any shared finished run differs beyond that class.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from gropd.record.record_compare import FIXED_BY, MONITORING_CLASS, PER_CPU_MONITORING, differing_keys

TIMINGS = ("time_rollout_s", "time_teacher_s", "time_update_s")  # measured, not computed


def metrics(run: Path) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [{key: value for key, value in row.items() if key not in TIMINGS} for row in rows]


def scores(run: Path) -> dict[str, Any] | None:
    """The summary's numbers: Macro and each suite's record (the model's path names where it ran, so it is left out);
    None for a run with no evaluation (a collapsed run is not evaluated)."""
    path = run / "eval" / "summary.json"
    if not path.exists():
        return None
    summary = json.loads(path.read_text())
    return {"macro": summary.get("macro"), "suites": summary.get("suites")}


def first_difference(mine: Path, theirs: Path) -> tuple[str | None, bool]:
    """(where two finished runs first differ, None when they do not; whether a monitoring correlation differed
    within its tolerance)."""
    rows, their_rows = metrics(mine), metrics(theirs)
    monitoring = False
    for step, (a, b) in enumerate(zip(rows, their_rows, strict=False), 1):
        differ, close = differing_keys(a, b)
        monitoring = monitoring or bool(close)
        if differ:
            return f"step {step}: {', '.join(f'{k} {a.get(k)!r} vs {b.get(k)!r}' for k in differ[:3])}", monitoring
    if len(rows) != len(their_rows):
        return f"{len(rows)} steps vs {len(their_rows)}", monitoring
    evaluations = scores(mine), scores(theirs)
    if evaluations[0] != evaluations[1]:
        macros = [None if found is None else found["macro"] for found in evaluations]
        return f"evaluation: Macro {macros[0]!r} vs {macros[1]!r} (None: not evaluated)", monitoring
    return None, monitoring


def finished(run: Path) -> bool:
    try:
        return json.loads((run / "status.json").read_text()).get("status") in ("finished", "collapsed")
    except (OSError, ValueError):
        return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mine", type=Path)
    parser.add_argument("theirs", type=Path)
    parser.add_argument("--profile", default="tiny")
    args = parser.parse_args(argv)
    shared = sorted(
        run.name
        for run in (args.mine / args.profile).iterdir()
        if finished(run) and finished(args.theirs / args.profile / run.name)
    )
    differ = monitored = 0
    for name in shared:
        found, monitoring = first_difference(args.mine / args.profile / name, args.theirs / args.profile / name)
        differ += found is not None
        monitored += found is None and monitoring
        same_in = f"identical in training and evaluation; {MONITORING_CLASS}" if monitoring else "identical"
        print(f"{name}: {same_in if found is None else 'differs at ' + found}")
    same = len(shared) - differ
    print(
        f"{same} of {len(shared)} shared finished runs identical in training and evaluation "
        f"({same - monitored} bit for bit, {monitored} with {MONITORING_CLASS})"
    )
    if monitored:
        print(
            f"({', '.join(PER_CPU_MONITORING)}: computed through numpy's per-CPU BLAS by runs made before {FIXED_BY})"
        )
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())

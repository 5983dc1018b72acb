"""A run's numbers within their ranges: what makes an evaluation summary, a J_H curve or a finished run's step count
impossible. A record that fails is broken (RunDir.record_problem): a named missing run, never a table cell or a
verdict.

    eval/summary.json   each suite's avg_at_k, pass_at_k and maj_at_k a number in [0, 100] where present, k a
                        positive integer, questions and timeouts non-negative integers, mean_tokens >= 0; every suite
                        the run's config names (eval.suites) present
    horizon.json        one value per horizon, each an AUC in [0, 1] (or values null: no informative prompt)
"""

from __future__ import annotations

import math
from typing import Any

PERCENTS = ("avg_at_k", "pass_at_k", "maj_at_k")
COUNTS = ("questions", "timeouts")


def _real(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _count(value: Any, least: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


def suite_problem(name: str, record: Any) -> str | None:
    """Why one suite's summary record is impossible (None when it is not)."""
    if not isinstance(record, dict):
        return f"suite {name} is not a record"
    for key in PERCENTS:
        if key in record and record[key] is not None and not (_real(record[key]) and 0 <= record[key] <= 100):
            return f"suite {name}: {key} {record[key]!r} is not a percentage in [0, 100]"
    if "k" in record and not _count(record["k"], 1):
        return f"suite {name}: k {record['k']!r} is not a positive integer"
    for key in COUNTS:
        if record.get(key) is not None and not _count(record[key], 0):
            return f"suite {name}: {key} {record[key]!r} is not a count"
    tokens = record.get("mean_tokens")
    if tokens is not None and not (_real(tokens) and tokens >= 0):
        return f"suite {name}: mean_tokens {tokens!r} is not a length"
    return None


def summary_problem(summary: Any, config: dict[str, Any]) -> str | None:
    """Why eval/summary.json cannot be believed (None when it can; an absent or suite-less summary is the reader's
    own Missing line, not a broken record)."""
    if not isinstance(summary, dict) or not isinstance(summary.get("suites"), dict) or not summary["suites"]:
        return None
    suites = summary["suites"]
    for name, record in suites.items():
        if problem := suite_problem(name, record):
            return f"eval/summary.json, {problem}"
    named = (config.get("eval") or {}).get("suites")
    if isinstance(named, list) and (absent := [name for name in named if name not in suites]):
        return f"eval/summary.json has no record of suite {', '.join(map(str, absent))} (eval.suites names it)"
    return None


def horizon_problem(horizon: Any) -> str | None:
    """Why horizon.json cannot be believed (None when it can)."""
    if not isinstance(horizon, dict):
        return None
    horizons, values = horizon.get("horizons"), horizon.get("values")
    if values is None:  # no informative prompt: J_H undefined at every horizon (gropd.horizon.separation_curve)
        return None
    if not isinstance(horizons, list) or not isinstance(values, list) or len(horizons) != len(values):
        return "horizon.json does not hold one value per horizon"
    for at, value in zip(horizons, values, strict=True):
        if not (_real(value) and 0 <= value <= 1):
            return f"horizon.json: J_H {value!r} at horizon {at} is not an AUC in [0, 1]"
    return None

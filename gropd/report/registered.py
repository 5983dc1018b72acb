"""What experiments/registration.yaml says of each judged claim: the entries in force that were written after the
first run the claim reads began ("set after the runs"), and the claims page's per-claim summary in machine-readable
form (claims.json, from which README's results block is generated).
"""

from __future__ import annotations

from typing import Any

from gropd.report.evidence import Evidence, began_at
from gropd.report.registration import Dated

READS = {  # the thresholds each rule's verdict reads (registration `thresholds`)
    "distillation": ["lift_fraction"],
    "beats": [],
    "unstable_vs_stable": ["majority", "reward_fall", "length_near_cap"],
    "large_lambda_unstable": ["majority", "reward_fall", "length_near_cap", "large_lambda"],
    "gamma_one_unstable": ["majority", "reward_fall", "length_near_cap"],
    "cross_pressure_above_matched": [],
}
NEAR = {"distillation", "unstable_vs_stable", "large_lambda_unstable", "gamma_one_unstable"}  # read `readings`


def in_force(ev: Evidence, key: str, rule: str) -> list[tuple[str, Dated]]:
    """(what, version) of every registration entry in force that claim `key` (judged by `rule`) reads: its
    thresholds, its test, the reading near a threshold where it has threshold decisions, the family where it has
    members in it, and the claim's own entry."""
    reg = ev.registration
    found = [(f"threshold {n} = {reg.thresholds[n][-1].value:g}", reg.thresholds[n][-1]) for n in READS[rule]]
    found += [(f"test {reg.test(rule).test}", reg.test(rule))]
    found += [(f"reading {reg.reading().reading}", reg.reading())] if rule in NEAR else []
    claim = reg.claims[key]
    found += [(f"family {reg.family_rule().rule}", reg.family_rule())] if claim.members else []
    return found + [(f"claim {key}'s comparisons", claim)]


def set_after(ev: Evidence, key: str, rule: str, runs: list) -> list[str]:
    """'test welch_evaluations (0bccfa1, 2026-12-05 20:25 UTC)' for each entry in force written after the first of
    `runs` began ('' list: none, or no run records its start)."""
    began = began_at(runs)
    if began is None:
        return []
    return [f"{what} ({version.stamp})" for what, version in in_force(ev, key, rule) if version.date > began]


def first_started(runs: list) -> str:
    began = began_at(runs)
    return "no recorded start" if began is None else f"{began:%Y-%m-%d %H:%M} UTC"


def seeds_of(section: Any) -> str:
    """'3' or '3–5': the seed counts of the settings a section reads (their runs' distinct seeds per setting)."""
    counts: dict[tuple, set[int]] = {}
    for run in section.runs:
        if run.status is not None:
            counts.setdefault((run.grid, run.config.get("pairing"), run.entry.run_id.split("__seed")[0]), set()).add(
                run.seed
            )
    sizes = sorted({len(seeds) for seeds in counts.values()})
    return "—" if not sizes else str(sizes[0]) if len(sizes) == 1 else f"{sizes[0]}–{sizes[-1]}"

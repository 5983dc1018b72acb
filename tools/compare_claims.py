"""The claims two results directories judge differently, with both numbers: how experiments/TINY.md reports the
verdicts that changed when a set of runs is remade (round 7's portable remake, round 8's).

    python tools/compare_claims.py OLD NEW [--profile tiny] [--experiments experiments]

Both are judged by the claims page's rules (gropd.report.claims.judge) under the same experiments/. Prints each claim
whose verdict, a cell's outcome or its reading after Holm differs (old → new, every cell whose outcome changed, with
both reasons), then each registered comparison resolved on one side only (both intervals), and exits 1 when anything
differs, 0 when every verdict and every registered call is the same.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gropd.report.claims import Claims, judge
from gropd.report.evidence import Evidence
from gropd.report.families import Comparison
from gropd.report.settings import load_settings
from gropd.report.verdicts import Verdict


def judged(results: Path, profile: str, experiments: Path) -> Claims:
    """The claims page's verdicts and families for results/<profile>/ under `experiments`, as the page decides them:
    at the seeds experiments/registration.yaml registers."""
    ev = Evidence(profile, results, experiments, load_settings(experiments / "report.yaml"))
    return judge(ev.variant(registered_seeds=True))


def changed_claims(old: Claims, new: Claims) -> list[str]:
    """Per claim whose verdict, reading after Holm or a cell's outcome differs: 'claim K. title: old → new', its
    'after Holm' if that differs, and each cell whose outcome differs, both verdicts with their reasons (a claim or
    cell on one side only: 'absent'). A cell whose numbers moved under the same outcome is not listed."""
    before = {j.claim.key: j for j in old.judged}
    lines = []
    for after in new.judged:
        was = before.get(after.claim.key)
        then = was.section.cells if was else {}
        moved = [
            (cell, then.get(cell), after.section.cells.get(cell))
            for cell in dict.fromkeys([*then, *after.section.cells])
            if outcome(then.get(cell)) != outcome(after.section.cells.get(cell))
        ]
        holm = was is not None and was.after_holm != after.after_holm
        if was and not moved and not holm and was.verdict.outcome == after.verdict.outcome:
            continue
        lines.append(f"claim {after.name}: {outcome(was.verdict if was else None)} → {after.verdict.outcome}")
        lines += [f"  after Holm: {was.after_holm} → {after.after_holm}"] if holm else []
        lines += [f"  {cell}: {said(a)} → {said(b)}" for cell, a, b in moved]
    return lines


def outcome(verdict: Verdict | None) -> str:
    return "absent" if verdict is None else verdict.outcome


def said(verdict: Verdict | None) -> str:
    """A cell's verdict as the page states it (its reason says whether it is fragile), or 'absent'."""
    return "absent" if verdict is None else f"{verdict.outcome} — {verdict.reason}"


def changed_calls(old: Claims, new: Claims) -> list[str]:
    """Each registered comparison of either side whose call (resolved above 0, below 0, or not) differs: its name and
    both intervals ('absent' on a side without it)."""
    a, b = old.families.registered, new.families.registered
    lines = []
    for identity in dict.fromkeys([*a, *b]):
        if call(a.get(identity)) != call(b.get(identity)):
            named = (b.get(identity) or a.get(identity)).name
            lines.append(f"{named}: {shown(a.get(identity))} → {shown(b.get(identity))}")
    return lines


def call(comparison: Comparison | None) -> int:
    """+1 or −1 where the comparison is resolved, 0 where it is not, has no interval or is absent."""
    return 0 if comparison is None or comparison.interval is None else comparison.interval.call


def shown(comparison: Comparison | None) -> str:
    return "absent" if comparison is None else comparison.text()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--profile", default="tiny")
    parser.add_argument("--experiments", type=Path, default=Path("experiments"))
    args = parser.parse_args(argv)
    old, new = (judged(root, args.profile, args.experiments) for root in (args.old, args.new))
    claims, calls = changed_claims(old, new), changed_calls(old, new)
    print(f"## Claims whose verdict changed ({args.old} → {args.new})", *(claims or ["none"]), sep="\n")
    print("\n## Registered comparisons resolved on one side only", *(calls or ["none"]), sep="\n")
    return 1 if claims or calls else 0


if __name__ == "__main__":
    sys.exit(main())

"""README's generated blocks: the results at a glance and the CPUs the numbers were checked on, built from the
committed runs (results/reference) and experiments/ the way the reports build them, never typed.

    python -m gropd.report.front_page            print both blocks
    python -m gropd.report.front_page --write    rewrite README.md between its markers
    python -m gropd.report.front_page --check    exit 1, naming the block, when README.md differs from a fresh build

Blocks (each between `<!-- NAME: ... -->` and `<!-- end of NAME -->`):
    results       Table 1's Macro per pairing × method with its seeds and paired Δ, then one row a claim: what the
                  paper says, what the twin finds, the verdict, n, a link to the claim's section of the claims page
    reproducibility   the CPUs that made the committed runs (their status.json) and the checks of
                  experiments/portability.yaml, one row a check
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from fileio import load_yaml
from gropd.report.claims import Claims, claims, summary
from gropd.report.evidence import Evidence
from gropd.report.formats import Cell, Table, pipe_table
from gropd.report.long_horizon import pilot_heading, side_by_side
from gropd.report.settings import load_settings
from gropd.report.tables import table1

REFERENCE = Path("results/reference")
CLAIMS_PAGE = "paper_figures/tiny/claims.md"  # what `./reproduce.sh report` writes (git-ignored)
TABLE1_COLUMNS = ("Pairing", "Method", "seeds", "Macro", "Δ Macro vs vanilla OPD")
BLOCKS = ("results", "reproducibility")


def marker(name: str) -> tuple[str, str]:
    """The lines that open and close block `name` in README.md."""
    return f"<!-- {name}: python -m gropd.report.front_page --write -->", f"<!-- end of {name} -->"


def table1_lines(table: Table) -> list[str]:
    """Table 1 cut to its Macro: TABLE1_COLUMNS of every row, bold kept (a paired call's win)."""
    names = [column.title for column in table.columns]
    keep = [names.index(name) for name in TABLE1_COLUMNS]
    return pipe_table(list(TABLE1_COLUMNS), [[row[i] for i in keep] for row in table.rows])


def claims_lines(rows: list[dict[str, Any]]) -> list[str]:
    """One row a claim (claims.json's summary): its key linked to its section, the paper's claim, the twin's
    finding, the verdict at the registered seeds (and at all seeds where they read otherwise), whether a rule it
    reads was set after its runs (with the verdict by the rules as first registered), n."""
    cells = []
    for row in rows:
        link = f"[{row['claim']}]({CLAIMS_PAGE}#claim-{row['claim']})"
        verdict = row["verdict"]
        verdict += f"; at all seeds: {row['verdict_all_seeds']}" if row["verdict_all_seeds"] != verdict else ""
        first = row["set_after_the_runs"].rpartition("as first registered: ")[2]
        registered = f"set after the runs; as first registered: {first}" if row["set_after_the_runs"] else "before"
        cells.append(Cell.texts(link, row["statement"], row["finding"], verdict, registered, row["n"]))
    return pipe_table(["claim", "the paper", "the twin finds", "verdict", "rules registered", "seeds (n)"], cells)


def results_block(ev: Evidence) -> list[str]:
    table = table1(ev).content
    return [
        f"**Table 1 on the tiny twin** (Macro Avg@4 %, mean ± sample std over n seeds; Δ: the paired difference "
        f"over the seeds both ran with its 95% t interval, bold where it excludes 0; from `{ev.profile_results}/`):",
        "",
        *table1_lines(table),
        "",
        "**The paper's claims on the twin** (each verdict by its rule at the registered seeds, experiments/"
        "registration.yaml; 'set after the runs': a rule it reads was written after its first run began, and the "
        "verdict by the rules as first registered is given; the claims page gives each rule, its evidence and runs):",
        "",
        *claims_lines(summary(page := claims(ev).content)),
        *long_horizon_lines(ev, page),
    ]


def long_horizon_lines(ev: Evidence, page: Claims) -> list[str]:
    """World 5 beside world 4 (the claims page's section, its tables alone), [] without a registered grid."""
    lines = []
    for pilot, world4 in page.long:
        lines += [
            "",
            f"**The long horizon, {pilot_heading(pilot)}** (world 5: responses of hundreds of tokens, runs on "
            f"`{pilot.results}/`; the [claims page]({CLAIMS_PAGE}#world-5-{pilot.registration.grid}) gives the "
            "evidence):",
            "",
            *side_by_side(pilot, world4),
        ]
    return lines


def cpu_name(cpu: dict[str, Any]) -> str:
    vendor = {"GenuineIntel": "Intel", "AuthenticAMD": "AMD"}.get(str(cpu.get("vendor")), str(cpu.get("vendor")))
    return f"{vendor} family {cpu.get('family')} model {cpu.get('model')}"


def reproducibility_block(results: Path, checks_file: Path) -> list[str]:
    """Who made the committed runs (counted from their status.json) and every check of `checks_file`."""
    makers: Counter[str] = Counter()
    for status in sorted(results.glob("tiny/*/status.json")):
        machines = json.loads(status.read_text()).get("machines") or [{}]
        makers[f"{cpu_name(machines[0].get('cpu') or {})}, {machines[0].get('numerics')} mode"] += 1
    made = "; ".join(f"{n} on {who}" for who, n in makers.most_common())
    rows = [
        Cell.texts(
            cpu_name(c["cpu"]) + ("" if c["cpu"]["avx512"] else " (no AVX-512)"),
            f"{c['date']}, {c['commit']}",
            c["compared"],
            f"`{c['command']}`",
            c["result"],
        )
        for c in load_yaml(checks_file.read_text())["checks"]
    ]
    return [
        f"The committed runs under `{results}/` were made: {made} (each run's `status.json` names its machine). "
        f"Checked elsewhere since (`{checks_file}`):",
        "",
        *pipe_table(["CPU", "when, commit", "compared", "command", "result"], rows),
    ]


def blocks(results: Path = REFERENCE, experiments: Path = Path("experiments")) -> dict[str, list[str]]:
    """Every block's lines, built from `results` and `experiments`."""
    ev = Evidence("tiny", results, experiments, load_settings(experiments / "report.yaml"))
    return {
        "results": results_block(ev),
        "reproducibility": reproducibility_block(results, experiments / "portability.yaml"),
    }


def replaced(readme: str, name: str, lines: list[str]) -> str:
    """`readme` with block `name` replaced by `lines` (ValueError when its markers are missing or out of order)."""
    start, end = marker(name)
    head, found, rest = readme.partition(start + "\n")
    middle, found_end, tail = rest.partition(end)
    if not found or not found_end:
        raise ValueError(f"README.md lacks the markers of block {name!r}: {start} ... {end}")
    return head + start + "\n" + "\n".join(lines) + "\n" + end + tail


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write", action="store_true", help="rewrite README.md's blocks")
    parser.add_argument("--check", action="store_true", help="exit 1 when README.md's blocks differ from a build")
    parser.add_argument("--readme", type=Path, default=Path("README.md"))
    parser.add_argument("--results", type=Path, default=REFERENCE)
    args = parser.parse_args(argv)
    built = blocks(args.results)
    if not (args.write or args.check):
        print("\n\n".join("\n".join(lines) for lines in built.values()))
        return 0
    readme = args.readme.read_text()
    fresh = readme
    for name, lines in built.items():
        fresh = replaced(fresh, name, lines)
    if args.write:
        args.readme.write_text(fresh)
        return 0
    stale = [name for name in BLOCKS if replaced(readme, name, built[name]) != readme]
    for name in stale:
        print(f"{args.readme}: block '{name}' differs from a fresh build: python -m gropd.report.front_page --write")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())

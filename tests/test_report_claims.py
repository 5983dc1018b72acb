"""The claims page (gropd.report.claims) on results fixtures, claims 0–2 (final scores) and the page:
every verdict, with the numbers derived by hand. No training: the fixtures are status.json,
metrics.jsonl and summary.json files.

Run ids follow gropd.config.grids; seeds beyond a grid's own (`--seeds N`) are found on disk.
"""

from __future__ import annotations

import json

import pytest
from report_fixtures import (
    P1,
    P2,
    P3,
    P4,
    macro_summary,
    report_context,
    seeded,
    table1_grid,
    write_experiments,
    write_run,
)

from gropd.report import ARTEFACTS, build
from gropd.report.claim_scores import beats_section, distillation_section, gains_section
from gropd.report.verdicts import distillation

T1, T2, T3, T4 = "I4nothink→I1.7nothink", "I32nothink→I1.7nothink", "I4think→B1.7", "B4→B1.7"


def scored(root, base: str, pairing: str, method: str, macros: list, profile: str = "tiny") -> None:
    """One finished run per macro (seed = position); a None macro writes a collapsed seed instead."""
    for seed, value in enumerate(macros):
        fields = {"pairing": pairing, "method": method, "seed": seed}
        if value is None:
            write_run(root / "results", profile, seeded(base, seed), "collapsed", collapse_step=5, fields=fields)
        else:
            write_run(root / "results", profile, seeded(base, seed), fields=fields, eval_summary=macro_summary(value))


# --- 0. does distillation work -------------------------------------------------------------


@pytest.fixture
def distill_world(tmp_path):
    """Pre-OPD student 10, teacher 40 (gap 30) on P1; P2's teacher (I32 nothink) is not in grid table6."""
    write_experiments(
        tmp_path,
        grids={
            "table1": table1_grid(P1, P2),
            "table6": {
                "kind": "eval",
                "seeds": [0],
                "include": [{"model": "I1.7", "mode": "nothink"}, {"model": "I4", "mode": "nothink"}],
            },
        },
    )
    res = tmp_path / "results"
    write_run(
        res,
        "tiny",
        "table6__I1.7-nothink",
        fields={"model": "I1.7", "mode": "nothink"},
        eval_summary=macro_summary(10.0),
    )
    write_run(
        res, "tiny", "table6__I4-nothink", fields={"model": "I4", "mode": "nothink"}, eval_summary=macro_summary(40.0)
    )
    scored(tmp_path, f"table1__{P1}__gropd", P1, "gropd", [25.0, 26.0, 27.0])
    scored(tmp_path, f"table1__{P1}__opd", P1, "opd", [12.0, 13.0, 14.0])
    scored(tmp_path, f"table1__{P2}__gropd", P2, "gropd", [30.0, 31.0])
    return tmp_path


def test_distillation_verdict_per_matched_pairing_and_method(distill_world):
    section = distillation_section(report_context(distill_world))
    text = "\n".join(section.evidence)
    # GR-OPD: mean 26, sd 1: lift 16 ≥ 30/3 and > 2 x 1; 16/30 = 0.53.
    assert (
        f"| {T1} | GR-OPD (λ=0.25, γ=0.99) | 10.00 (n=1) | 40.00 (n=1) | 26.00 ± 1.00 (n=3) | +16.00 | 0.53 "
        "| reproduced |"
    ) in text
    reason = "lift +16.00 = 0.53 of the gap 30.00, beyond noise 2.00"
    assert f"- {T1}, GR-OPD (λ=0.25, γ=0.99): reproduced — {reason}" in text
    # OPD: mean 13: lift 3 < 10.
    assert f"- {T1}, vanilla OPD: not reproduced — lift +3.00 below 0.333 of the gap 30.00" in text
    # P2: the table6 grid has no I32 nothink run; GR-OPD also lacks seed 2, OPD every seed.
    assert "— (grid table6 has no I32 nothink run)" in text
    assert (
        f"- {T2}, GR-OPD (λ=0.25, γ=0.99): not tested — no pre-OPD evaluation of the teacher; missing runs: "
        f"`table1__{P2}__gropd` seed 2 (`./reproduce.sh table1 --seeds 3`)"
    ) in text
    assert f"`table1__{P2}__opd` seeds 0, 1, 2" in text
    assert section.verdict.outcome == "not reproduced"
    assert section.verdict.reason == f"not reproduced in {T1}, vanilla OPD"
    assert f"run table1__{P2}__opd: not run" in section.missing


def test_distillation_rule_collapse_noise_and_gap():
    assert distillation(10.0, 40.0, [30.0, 31.0], 1).reason == "1 of 3 seeds collapsed"
    # mean 25: lift 15 ≥ 10 but the sd is 10, so 2 x sd = 20 > 15.
    within = distillation(10.0, 40.0, [15.0, 25.0, 35.0], 0)
    assert (within.outcome, within.reason) == ("not reproduced", "lift +15.00 within 2 x seed spread (20.00)")
    assert distillation(10.0, 40.0, [20.0, 21.0], 0).outcome == "not tested"
    assert distillation(40.0, 30.0, [20.0, 21.0, 22.0], 0).reason.startswith("the teacher does not beat the student")


# --- 1 and 2. GR-OPD beats vanilla OPD ------------------------------------------------------


@pytest.fixture
def beats_world(tmp_path):
    """Grid table1 lists seed 0 only; seeds 1 and 2 are on disk (as `--seeds 3` leaves them)."""
    write_experiments(tmp_path, grids={"table1": table1_grid(P1, P2, P3, P4)})
    scored(tmp_path, f"table1__{P1}__gropd", P1, "gropd", [30.0, 32.0, 34.0])  # mean 32, sd 2
    scored(tmp_path, f"table1__{P1}__opd", P1, "opd", [20.0, 21.0, 22.0])  # mean 21, sd 1
    scored(tmp_path, f"table1__{P2}__gropd", P2, "gropd", [20.0, 24.0, 28.0])  # mean 24, sd 4
    scored(tmp_path, f"table1__{P2}__opd", P2, "opd", [22.0, 23.0, 24.0])  # mean 23, sd 1
    scored(tmp_path, f"table1__{P3}__gropd", P3, "gropd", [5.0, 6.0])
    scored(tmp_path, f"table1__{P3}__opd", P3, "opd", [None, None])
    scored(tmp_path, f"table1__{P4}__gropd", P4, "gropd", [10.0])
    scored(tmp_path, f"table1__{P4}__opd", P4, "opd", [9.0, 8.0])
    return tmp_path


def test_beats_per_pairing_and_overall(beats_world):
    section = beats_section(report_context(beats_world))
    text = "\n".join(section.evidence)
    # P1: per-seed differences 10, 11, 12: mean 11, sd 1; t(0.975, 2) = 4.3027, half-width 4.3027 / √3 = 2.48
    row = (
        f"| {T1} | GR-OPD (λ=0.25, γ=0.99): 32.00 ± 2.00 (n=3) | 21.00 ± 1.00 (n=3) | +11.00 ± 1.00 (n=3) | "
        "[+8.52, +13.48] | GR-OPD better | reproduced |"
    )
    assert row in text
    assert f"- {T1}: reproduced — GR-OPD better (+11.00 ± 2.48 over 3 paired seeds)" in text
    # P2: differences −2, 1, 4: mean 1, sd 3, half-width 4.3027 x 3 / √3 = 7.45: the interval holds 0
    assert f"- {T2}: not reproduced — no difference resolved at 3 seeds (+1.00 ± 7.45 over 3 paired seeds)" in text
    # P3: OPD collapsed in both seeds, GR-OPD in none.
    assert (
        f"| {T3} | GR-OPD (λ=0, γ=0.99): 5.50 ± 0.71 (n=2) | —, Collapse in 2 of 2 | — | — | — | reproduced |" in text
    )
    assert f"- {T3}: reproduced — vanilla OPD collapsed in 2 of 2 seeds, GR-OPD in none (a collapse loses)" in text
    # P4: one GR-OPD seed.
    assert (
        f"- {T4}: not tested — needs ≥ 2 usable seeds per setting (GR-OPD has 1); missing runs: "
        f"`table1__{P4}__gropd` seeds 1, 2; `table1__{P4}__opd` seed 2 (`./reproduce.sh table1 --seeds 3`)"
    ) in text
    assert (section.verdict.outcome, section.verdict.reason) == ("not reproduced", f"not reproduced in {T2}")
    # one seed pair (seed 0: 10 vs 9) has no interval
    row = (
        f"| {T4} | GR-OPD (λ=0.25, γ=0.99): 10.00 (n=1) | 8.50 ± 0.71 (n=2) | +1.00 ± 0.00 (n=1) | — | "
        "no difference resolved at 1 seed | not tested |"
    )
    assert row in text
    assert f"`table1__{P1}__gropd__seed2` (finished)" in "\n".join(section.evidence)


@pytest.mark.parametrize(
    "gropd, opd, outcome, reason",
    [
        ([30.0, 31.0], [20.0, 21.0], "reproduced", "GR-OPD better (+10.00 ± 0.00 over 2 paired seeds)"),
        ([20.0, 21.0], [30.0, 31.0], "not reproduced", "vanilla OPD better (-10.00 ± 0.00 over 2 paired seeds)"),
        ([None, 21.0], [30.0, 31.0], "not reproduced", "GR-OPD collapsed in 1 of 2 seeds"),
        (
            [None, 21.0],
            [None, 31.0],
            "not reproduced",
            "GR-OPD collapsed in 1 of 2 seeds; vanilla OPD collapsed in 1 of 2",
        ),
    ],
)
def test_beats_rule_on_one_pairing(tmp_path, gropd, opd, outcome, reason):
    write_experiments(tmp_path, grids={"table1": table1_grid(P1)})
    scored(tmp_path, f"table1__{P1}__gropd", P1, "gropd", gropd)
    scored(tmp_path, f"table1__{P1}__opd", P1, "opd", opd)
    section = beats_section(report_context(tmp_path))
    assert f"- {T1}: {outcome} — {reason}" in section.evidence
    assert section.verdict.outcome == outcome


@pytest.mark.parametrize(
    "p2_gropd, outcome, reason",
    [
        ([33.0, 34.0, 35.0], "reproduced", f"reproduced in {T1}, {T2}"),  # P2: 34 − 23 = +11 > 2
        ([20.0, 24.0, 28.0], "not reproduced", f"not reproduced in {T2}"),
        ([33.0], "not tested", f"not tested in {T2}"),
    ],
)
def test_gains_of_the_matched_nothink_pairings(tmp_path, p2_gropd, outcome, reason):
    write_experiments(tmp_path, grids={"table1": table1_grid(P1, P2, P3)})
    scored(tmp_path, f"table1__{P1}__gropd", P1, "gropd", [30.0, 32.0, 34.0])
    scored(tmp_path, f"table1__{P1}__opd", P1, "opd", [20.0, 21.0, 22.0])
    scored(tmp_path, f"table1__{P2}__gropd", P2, "gropd", p2_gropd)
    scored(tmp_path, f"table1__{P2}__opd", P2, "opd", [22.0, 23.0, 24.0])
    section = gains_section(report_context(tmp_path))
    assert (section.verdict.outcome, section.verdict.reason) == (outcome, reason)
    assert "+10.9 and +11.5" in section.paper  # the paper's numbers, quoted as the paper's
    assert section.evidence[0].startswith("Magnitudes are not comparable across profiles")
    assert not any(T3 in line for line in section.evidence if line.startswith("|"))  # cross-pattern left out


def test_gains_on_the_paper_profile_compare_magnitudes(tmp_path):
    write_experiments(tmp_path, grids={"table1": table1_grid(P1, P2)})
    section = gains_section(report_context(tmp_path, "paper"))
    assert section.evidence[0].startswith("Compare our differences with the paper's +10.9 and +11.5")
    assert section.verdict.outcome == "not tested"


# --- the page -------------------------------------------------------------------------------


def test_claims_page_and_provenance(beats_world):
    assert "claims" in ARTEFACTS
    paths = build(
        ["claims"],
        profile="tiny",
        results_root=beats_world / "results",
        experiments_dir=beats_world / "experiments",
        out_root=beats_world / "out",
    )
    assert [p.name for p in paths] == ["claims.md", "claims.provenance.json"]
    page = paths[0].read_text()
    assert "| 1. GR-OPD beats vanilla OPD in every pairing | not reproduced | not reproduced in " + T2 + " |" in page
    assert "## 6b. λ controls how much of the pressure is retained" in page
    # the summary gives the reason; the missing runs are named in the section
    assert "| 5. An unrestricted horizon (γ = 1) destabilises training | not tested | not tested in " in page
    summary_rows = [line for line in page.splitlines() if line.startswith("| 6a. ")]
    assert len(summary_rows) == 1 and "missing runs" not in summary_rows[0]
    assert "missing runs: `lambda__I4nothink-I1.7nothink__gropd-lam0.5` seeds 0, 1, 2;" in page
    assert f"**Verdict: not reproduced** — not reproduced in {T2}." in page
    assert "**Every rule.** Beyond noise: the difference of two means exceeds 2 x the larger sample std" in page
    record = json.loads(paths[1].read_text())
    assert record["artefact"] == "claims"
    runs = {run["run_id"]: run["state"] for run in record["runs"]}
    assert runs[f"table1__{P3}__opd__seed1"] == "collapsed"
    assert runs["lambda__I4nothink-I1.7nothink__gropd-lam0.5"] == "not run"
    assert "run lambda__I4nothink-I1.7nothink__gropd-lam0.5: not run" in record["missing"]

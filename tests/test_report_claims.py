"""The claims page on results fixtures: each rule's verdicts with the numbers derived by hand (distillation,
GR-OPD vs OPD paired by seed, one instability rule for claims 3–5 with collapse its extreme case, pressure by
per-run medians pooled over every grid), the runs a not-tested verdict names, and a claim added by
experiments/report.yaml alone. No training: the fixtures are status.json, config.yaml, metrics.jsonl and
summary.json files.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace

import pytest
import yaml
from report_fixtures import (
    P1,
    P2,
    P3,
    P4,
    P5,
    REPO,
    STEPS,
    dump,
    evidence,
    macro_summary,
    metric_rows,
    scored,
    seeded,
    table1_grid,
    write_experiments,
    write_run,
)

from gropd.config import ConfigError
from gropd.report import build
from gropd.report.claims import RULE_FUNCTIONS, claims
from gropd.report.evidence import Trend
from gropd.report.families import Comparison
from gropd.report.registration import load_registration
from gropd.report.stats import Interval, lift
from gropd.report.verdicts import Thresholds, Verdict, comparison, distillation, unstable

T1, T2, T3, T4, T5 = "I4nothink→I1.7nothink", "I32nothink→I1.7nothink", "I4think→B1.7", "B4→B1.7", "I32think→B1.7"
ONLY = {"lambda": None, "gamma": None, "table6": None}  # grids a test does not use: none written
LIMITS = Thresholds(**load_registration(REPO / "experiments").values())  # the registered thresholds (all 0.5, 1/3)


def claim(key: str) -> dict:
    """The real report.yaml's entry for claim `key`."""
    from report_fixtures import REPO

    return next(
        c for c in yaml.safe_load((REPO / "experiments" / "report.yaml").read_text())["claims"] if c["key"] == key
    )


def section(root, key: str, **changes):
    """(section, rule wording) of claim `key` (with `changes` to its entry) on the fixture tree under `root`."""
    ev = evidence(root)
    spec = ev.report.claims[[c.key for c in ev.report.claims].index(key)].model_copy(update=changes)
    return RULE_FUNCTIONS[spec.rule](ev, spec)


def bullets(s) -> dict[str, str]:
    return {name: f"{v.outcome} — {v.reason}" for name, v in s.cells.items()}


def shown(rows) -> list[list[str]]:
    """A section's table rows with each Comparison as its interval's text."""
    return [[c.text() if isinstance(c, Comparison) else c for c in row] for row in rows]


# --- 0. distillation works -------------------------------------------------------------------


def test_distillation_lift_is_a_t_interval_against_the_gap(tmp_path):
    """Pre-OPD student 10, teacher 40 (gap 30); GR-OPD 25, 26, 27: lift 15, 16, 17: mean 16 = 0.53 of the gap,
    [16 ± 4.3027 / √3] = [13.52, 18.48]; OPD 12, 13, 14: lift 3 < 10. P2's teacher has no table6 run."""
    table6 = {
        "kind": "eval",
        "seeds": [0],
        "include": [{"model": "I1.7", "mode": "nothink"}, {"model": "I4", "mode": "nothink"}],
    }
    write_experiments(tmp_path, grids={**ONLY, "table1": table1_grid(P1, P2), "table6": table6})
    write_run(tmp_path / "results", "tiny", "table6__I1.7-nothink", eval_summary=macro_summary(10.0))
    write_run(tmp_path / "results", "tiny", "table6__I4-nothink", eval_summary=macro_summary(40.0))
    scored(tmp_path, f"table1__{P1}__gropd", [25.0, 26.0, 27.0])
    scored(tmp_path, f"table1__{P1}__opd", [12.0, 13.0, 14.0])
    scored(tmp_path, f"table1__{P2}__gropd", [30.0, 31.0])
    s = section(tmp_path, "0")
    assert bullets(s) == {
        # se 1/√3 = 0.577: 16 / 0.577 = 27.7 and 3 / 0.577 = 5.2 standard errors from 0
        f"{T1}, GR-OPD (λ=0.25, γ=0.99)": "reproduced — lift +16.00 [+13.52, +18.48] (n=3) (27.7 se from 0) = 0.53 of "
        "the gap 30.00",
        f"{T1}, vanilla OPD": "not reproduced — lift +3.00 [+0.52, +5.48] (n=3) (5.2 se from 0) = 0.10 of the gap "
        "30.00, needs ≥ 0.33 and > 0",
        f"{T2}, GR-OPD (λ=0.25, γ=0.99)": "not tested — no pre-OPD evaluation of the teacher",
        f"{T2}, vanilla OPD": "not tested — no pre-OPD evaluation of the teacher",
    }
    table = "\n".join(shown(s.tables[0][2])[0])
    assert "10.00 (n=1)" in table and "26.00 ± 1.00 (n=3)" in table
    assert "0.53 (baseline n = 1, no spread)" in table  # 16 / 30
    assert f"`table1__{P2}__gropd__seed2`: not run; a not-tested verdict needs it" in "\n".join(s.missing)
    assert f"`table1__{P2}__opd`: not run" in s.missing


def test_distillation_carries_the_baselines_evaluation_noise(tmp_path):
    """The student and the teacher each evaluated at three evaluation seeds (table6 at `--seeds 3`): student 9, 10,
    11, teacher 39, 40, 41; GR-OPD 25, 26, 27. The lift is Welch's: 16, se² = 1/3 + 1/3, df = (2/3)² / ((1/3)²/2 x
    2) = 4, t(0.975, 4) = 2.776445: half-width 2.776445 x √(2/3) = 2.27; the share 16/30 = 0.53 with the delta
    method's interval [0.47, 0.60] (worked in tests/test_report_stats.py). Distances: the lift 16 / √(2/3) = 19.6
    standard errors from 0; the share's se √((1/30)² / 3 + (16/900)² / 3 + (14/900)² / 3) = 0.0236, (0.533 − 0.333) /
    0.0236 = 8.5 standard errors above a third."""
    table6 = {
        "kind": "eval",
        "seeds": [0],
        "include": [{"model": "I1.7", "mode": "nothink"}, {"model": "I4", "mode": "nothink"}],
    }
    write_experiments(tmp_path, grids={**ONLY, "table1": table1_grid(P1), "table6": table6})
    scored(tmp_path, "table6__I1.7-nothink", [9.0, 10.0, 11.0])
    scored(tmp_path, "table6__I4-nothink", [39.0, 40.0, 41.0])
    scored(tmp_path, f"table1__{P1}__gropd", [25.0, 26.0, 27.0])
    s = section(tmp_path, "0")
    assert bullets(s)[f"{T1}, GR-OPD (λ=0.25, γ=0.99)"] == (
        "reproduced — lift +16.00 [+13.73, +18.27] (n=3 vs 3, Welch) (19.6 se from 0) = 0.53 of the gap 30.00 (8.5 "
        "se above 0.33)"
    )
    row = shown(s.tables[0][2])[0]
    assert row[2:4] == ["10.00 ± 1.00 (n=3)", "40.00 ± 1.00 (n=3)"]
    assert row[6] == "0.53 [0.47, 0.60] (baseline n = 3 and 3)"


def test_distillation_rule_collapse_gap_and_seeds():
    assert distillation(10.0, 40.0, lift({0: 30.0, 1: 31.0}, 10.0), 1, LIMITS).reason == "1 of 3 seeds collapsed"
    assert distillation(10.0, 40.0, lift({0: 30.0}, 10.0), 0, LIMITS).outcome == "not tested"
    assert distillation(40.0, 30.0, lift({0: 20.0, 1: 21.0}, 40.0), 0, LIMITS).reason.startswith(
        "the teacher does not beat the student"
    )
    # lift 5 and 35: mean 20 ≥ 10, but [20 ± 12.706 x 21.2] holds 0.
    assert distillation(10.0, 40.0, lift({0: 15.0, 1: 45.0}, 10.0), 0, LIMITS).outcome == "not reproduced"


# --- 1 and 2. GR-OPD beats vanilla OPD --------------------------------------------------------


@pytest.fixture
def beats_world(tmp_path):
    """Grid table1 lists seed 0 only; seeds 1 and 2 are on disk (as `--seeds 3` leaves them)."""
    write_experiments(tmp_path, grids={**ONLY, "table1": table1_grid(P1, P2, P3, P4)})
    scored(tmp_path, f"table1__{P1}__gropd", [30.0, 32.0, 34.0])
    scored(tmp_path, f"table1__{P1}__opd", [20.0, 21.0, 22.0])
    scored(tmp_path, f"table1__{P2}__gropd", [20.0, 24.0, 28.0])
    scored(tmp_path, f"table1__{P2}__opd", [22.0, 23.0, 24.0])
    scored(tmp_path, f"table1__{P3}__gropd", [5.0, 6.0])
    scored(tmp_path, f"table1__{P3}__opd", [None, None])
    scored(tmp_path, f"table1__{P4}__gropd", [10.0])
    scored(tmp_path, f"table1__{P4}__opd", [9.0, 8.0])
    return tmp_path


def test_gropd_against_opd_paired_by_seed(beats_world):
    s = section(beats_world, "1")
    assert bullets(s) == {
        # differences 10, 11, 12: mean 11, std 1, half-width 4.3027 / √3 = 2.48; 11 / (1/√3) = 19.1 se from 0
        T1: "reproduced — GR-OPD better (19.1 se from 0): +11.00 [+8.52, +13.48] (n=3) (no pre-OPD evaluation of the "
        "student to set GR-OPD against)",
        # differences −2, 1, 4: mean 1, std 3, half-width 7.45: the interval holds 0; se √3, 1 / √3 = 0.6 se; the
        # difference resolved at 80% power (t(0.975, 2) 4.3027 + t(0.8, 2) 1.0607) x √3 = 9.29
        T2: "not reproduced — no difference resolved at 3 seeds (0.6 se from 0; this design resolves ±9.29 at 80% "
        "power): +1.00 [-6.45, +8.45] (n=3)",
        T3: "reproduced — vanilla OPD collapsed in 2 of 2 seeds, GR-OPD in none: reproduced by the collapse alone (no "
        "pre-OPD evaluation of the student to set GR-OPD against)",
        T4: "not tested — needs ≥ 2 seeds per setting (GR-OPD has 1)",
    }
    rows = {row[0]: row for row in shown(s.tables[0][2])}
    assert rows[T3][3] == "—, 2 collapsed" and rows[T4][4:6] == ["+1.00 (n=1)", "no difference resolved at 1 seed"]
    assert rows[T3][4:6] == ["—", "not used: a collapse decides"]  # not "no difference" beside "reproduced"
    assert [line.split(":")[0] for line in s.missing] == [
        f"`table1__{P3}__opd`",
        f"`table1__{P3}__opd__seed1`",
        f"`table1__{P4}__gropd__seed1`",
        f"`table1__{P4}__gropd__seed2`",
        f"`table1__{P4}__opd__seed2`",
    ]


def test_a_cell_won_by_a_collapse_says_so_and_sets_the_winner_against_the_untrained_student(tmp_path):
    """I4think→B1.7: vanilla OPD collapsed in both seeds, GR-OPD 5 and 6; the untrained student (B1.7 before OPD,
    table6) 10. GR-OPD − 10: −5, −4: mean −4.5, std 0.7071, t(0.975, 1) = 12.706: half-width 12.706 x 0.7071 / √2
    = 6.35: [−10.85, +1.85]: below the untrained student in the mean, not resolved at 2 seeds (se 0.5: 9.0 se from
    0; resolved at 80% power from (12.706 + t(0.8, 1) 1.3764) x 0.5 = 7.04)."""
    table6 = {"kind": "eval", "seeds": [0], "include": [{"model": "B1.7", "mode": "default"}]}
    write_experiments(tmp_path, grids={**ONLY, "table1": table1_grid(P3), "table6": table6})
    scored(tmp_path, "table6__B1.7-default", [10.0])
    scored(tmp_path, f"table1__{P3}__gropd", [5.0, 6.0])
    scored(tmp_path, f"table1__{P3}__opd", [None, None])
    s = section(tmp_path, "1")
    assert bullets(s) == {
        T3: "reproduced — vanilla OPD collapsed in 2 of 2 seeds, GR-OPD in none: reproduced by the collapse alone; "
        "better than vanilla OPD, not resolved against the untrained student: GR-OPD's mean Macro 5.50 against the "
        "untrained student's 10.00 (B1.7, default, before OPD; GR-OPD − the untrained student: -4.50 [-10.85, +1.85] "
        "(n=2), no difference resolved at 2 seeds (9.0 se from 0; this design resolves ±7.04 at 80% power); "
        "described)"
    }
    assert [c.family for c in s.comparisons] == ["described", "described"]  # the interval a collapse left unused too
    assert s.deciding == {}  # no interval decides the cell


def test_an_unresolved_difference_says_how_many_seeds_each_side_had():
    """Paired: the n both ran; unpaired (Welch: a trained setting against the untrained student's evaluations, or two
    pairings): each side's n, not the smaller alone."""
    names = ("GR-OPD", "the untrained student")
    assert comparison(Interval(1.0, -2.0, 4.0, 3), names) == "no difference resolved at 3 seeds"
    assert comparison(Interval(1.0, -2.0, 4.0, 3, sizes=(5, 3)), names) == "no difference resolved at 5 vs 3 seeds"
    assert comparison(Interval(1.0, 0.5, 1.5, 3, sizes=(5, 3)), names) == "GR-OPD better"


def test_the_matched_nothink_claim_reads_only_those_pairings(beats_world):
    assert list(bullets(section(beats_world, "2"))) == [T1, T2]


# --- 3–5. one instability rule ---------------------------------------------------------------


def test_the_instability_rule_and_its_thresholds():
    def trend(reward=None, length=None, cap=None, collapse=None):
        return Trend(length=length, reward=reward, pearson=None, cap=cap, collapse_step=collapse)

    assert unstable(trend(reward=(0.4, 0.2)), LIMITS) == []  # exactly half: not below it
    assert unstable(trend(reward=(0.4, 0.19)), LIMITS) == ["reward 0.400 → 0.190"]
    assert unstable(trend(length=(50.0, 100.0), cap=200), LIMITS) == ["length 50.0 → 100.0 of cap 200"]
    assert unstable(trend(length=(50.0, 99.0), cap=200), LIMITS) == []
    assert unstable(trend(length=(120.0, 110.0), cap=200), LIMITS) == []  # near the cap but not grown
    assert unstable(trend(reward=(0.0, 0.0), collapse=7), LIMITS) == ["collapsed at step 7"]


def write_cross(root, opd: list[str | float], gropd: list[str | float]) -> None:
    """Cross-pattern pairings P3 and P5, 10 steps each. An entry is 'collapsed' (at step 4, reward 0.3 then 0.1)
    or the reward of the last step (the first 9 at 0.3: first → last 10% = 0.3 → that value)."""
    write_experiments(root, grids={**ONLY, "table1": table1_grid(P3, P5)})
    for pairing in (P3, P5):
        for method, seeds in (("opd", opd), ("gropd", gropd)):
            for seed, entry in enumerate(seeds):
                if entry == "collapsed":
                    rows = metric_rows(4, verifier_reward=[0.3, 0.3, 0.1, 0.1], mean_response_len=60.0)
                    kw = {"state": "collapsed", "collapse_step": 4, "reason": "reward fell"}
                else:
                    rows = metric_rows(10, verifier_reward=[0.3] * 9 + [entry], mean_response_len=60.0)
                    kw = {"eval_summary": macro_summary(20.0)}
                write_run(root / "results", "tiny", seeded(f"table1__{pairing}__{method}", seed), metrics=rows, **kw)


def test_claim_3_opd_unstable_gropd_stable_collapse_being_the_extreme_case(tmp_path):
    write_cross(tmp_path, ["collapsed", 0.1], [0.3, 0.2])
    s = section(tmp_path, "3")
    expected = "reproduced — vanilla OPD unstable in 2 of 2 seeds, GR-OPD (λ=0, γ=0.99) in 0 of 2"
    assert bullets(s) == {T3: expected, T5: expected}
    rows = [row for row in s.tables[0][2] if row[0] == T3]
    assert rows[0][2:5] == ["0", "collapsed", "60.0 → 60.0 (cap 200)"]
    assert rows[0][-1] == "collapsed at step 4; reward 0.300 → 0.100"  # a collapse is no ratio: no distance
    assert rows[1][-1] == "reward 0.300 → 0.100 (reward ratio 0.33 below 0.5)"  # (one step a window: no se)
    assert rows[3][-1] == "stable (reward ratio 0.67 above 0.5)" and rows[3][-2] == "20.00"


@pytest.mark.parametrize(
    ("opd", "gropd", "outcome", "reason"),
    [
        (["collapsed", 0.3], [0.3, 0.3], "not reproduced", "vanilla OPD unstable in only 1 of 2 seeds"),
        ([0.3, 0.3], [0.3, 0.3], "not reproduced", "vanilla OPD unstable in none of 2 seeds"),
        (["collapsed", 0.1], [0.3, 0.1], "not reproduced", "GR-OPD (λ=0, γ=0.99) also unstable in 1 of 2 seeds"),
        (["collapsed"], [0.3, 0.3], "not tested", "needs ≥ 2 seeds per setting (vanilla OPD has 1)"),
    ],
)
def test_claim_3_not_reproduced_and_not_tested(tmp_path, opd, gropd, outcome, reason):
    write_cross(tmp_path, opd, gropd)
    assert bullets(section(tmp_path, "3"))[T3] == f"{outcome} — {reason}"


def write_sweep(root, grid: str, rewards: dict[tuple[float, float], list[float]]) -> None:
    """GR-OPD runs of P2 in `grid`, 10 steps, per (λ, γ) one last-step reward per seed (the rest at 0.4)."""
    entries = [{"pairing": P2, "method": "gropd", "gropd.lam": lam, "gropd.gamma": gamma} for lam, gamma in rewards]
    write_experiments(
        root, grids={**ONLY, "table1": table1_grid(P1), grid: {"kind": "train", "seeds": [0], "include": entries}}
    )
    for (lam, gamma), seeds in rewards.items():
        base = f"{grid}__{P2}__gropd-lam{lam:g}-gamma{gamma:g}"
        for seed, last in enumerate(seeds):
            rows = metric_rows(10, verifier_reward=[0.4] * 9 + [last], mean_response_len=50.0)
            write_run(root / "results", "tiny", seeded(base, seed), metrics=rows)


def test_claim_4_large_lambda_unstable_smaller_stable(tmp_path):
    write_sweep(tmp_path, "lambda", {(0.5, 0.99): [0.1, 0.1], (0.25, 0.99): [0.4, 0.4], (0.2, 0.99): [0.4]})
    s = section(tmp_path, "4")
    assert bullets(s) == {f"{T2}, γ=0.99": "not tested — needs ≥ 2 seeds per setting (GR-OPD (λ=0.2, γ=0.99) has 1)"}
    assert s.missing == [
        f"`lambda__{P2}__gropd-lam0.5-gamma0.99__seed2`: not run; a not-tested verdict needs it "
        "(`python -m gropd.cli grid lambda --seeds 3 --profile tiny`)",
        f"`lambda__{P2}__gropd-lam0.25-gamma0.99__seed2`: not run; a not-tested verdict needs it "
        "(`python -m gropd.cli grid lambda --seeds 3 --profile tiny`)",
        f"`lambda__{P2}__gropd-lam0.2-gamma0.99__seed1`: not run; a not-tested verdict needs it "
        "(`python -m gropd.cli grid lambda --seeds 3 --profile tiny`)",
        f"`lambda__{P2}__gropd-lam0.2-gamma0.99__seed2`: not run; a not-tested verdict needs it "
        "(`python -m gropd.cli grid lambda --seeds 3 --profile tiny`)",
    ]
    write_run(
        tmp_path / "results",
        "tiny",
        f"lambda__{P2}__gropd-lam0.2-gamma0.99__seed1",
        metrics=metric_rows(10, verifier_reward=0.4),
    )
    expected = "reproduced — GR-OPD (λ=0.5, γ=0.99) unstable in 2 of 2 seeds, GR-OPD (λ=0.25, γ=0.99) in 0 of 2, "
    assert bullets(section(tmp_path, "4")) == {f"{T2}, γ=0.99": expected + "GR-OPD (λ=0.2, γ=0.99) in 0 of 2"}


def test_claim_5_gamma_one_unstable(tmp_path):
    write_sweep(tmp_path, "gamma", {(0.2, 1.0): [0.1, 0.4], (0.2, 0.99): [0.4, 0.4], (0.25, 1.0): [0.1, 0.1]})
    assert bullets(section(tmp_path, "5")) == {
        f"{T2}, λ=0.2": "not reproduced — GR-OPD (λ=0.2, γ=1) unstable in only 1 of 2 seeds"
    }  # λ = .25 has no γ < 1 setting: nothing to contrast


# --- 6. pressure -------------------------------------------------------------------------------


def test_claim_6_medians_pooled_over_grids_paired_over_common_seeds(tmp_path):
    """Medians: cross P3 (table1, λ 0) 9 and 11 (seeds 0, 1); matched P1 (table1 λ .25 and its λ-sweep twin for
    seed 0) 1 and 3; matched P1 λ .5 (λ sweep, seed 0 only) 1: shown, not judged. Different pairings: Welch, not
    paired. Cross − P1 λ .25: 10 − 2 = 8, variances 2 and 2 over n = 2 each: se² = 2/2 + 2/2 = 2, df = 2² / (1²/1 +
    1²/1) = 2, t(0.975, 2) = 4.3027: half-width 4.3027 x √2 = 6.08: [+1.92, +14.08], 8 / √2 = 5.7 se from 0. Claim
    6's grids are Table 1's (one comparison per pairing pair): the claim read with grid lambda too shows the λ-sweep
    settings, as a scratch entry may."""
    write_experiments(tmp_path, grids={"table1": table1_grid(P1, P3), "gamma": None, "table6": None})

    def rows(median: float) -> list[dict]:
        values = [median - 1] * 4 + [median] * 2 + [1000.0] * 4  # STEPS of them, median `median`
        return metric_rows(STEPS, pressure_normalised=values, pressure_retained=0.0)

    for seed, (cross, matched) in enumerate(((9.0, 1.0), (11.0, 3.0))):
        write_run(tmp_path / "results", "tiny", seeded(f"table1__{P3}__gropd", seed), metrics=rows(cross))
        write_run(tmp_path / "results", "tiny", seeded(f"table1__{P1}__gropd", seed), metrics=rows(matched))
    write_run(tmp_path / "results", "tiny", f"lambda__{P1}__gropd-lam0.25", metrics=rows(1.0))
    write_run(tmp_path / "results", "tiny", f"lambda__{P1}__gropd-lam0.5", metrics=rows(1.0))
    assert list(bullets(section(tmp_path, "6"))) == [f"{T3} λ=0 vs {T1} λ=0.25"]  # Table 1's settings alone
    s = section(tmp_path, "6", grids=["table1", "lambda"])
    assert bullets(s) == {f"{T3} λ=0 vs {T1} λ=0.25": "reproduced — cross-pattern better (5.7 se from 0)"}
    pairs = {row[0]: row[1:] for row in shown(s.tables[1][2])}
    assert pairs[f"{T3} λ=0 vs {T1} λ=0.25"] == [
        "+8.00 [+1.92, +14.08] (n=2 vs 2, Welch)",
        "cross-pattern better (5.7 se from 0)",
    ]
    assert pairs[f"{T3} λ=0 vs {T1} λ=0.5"] == ["+9.00 (n=2 vs 1, Welch)", "not judged"]
    assert {(row[0], row[2]): row[3] for row in s.tables[0][2]}[T1, "GR-OPD (λ=0.25, γ=0.99)"] == "2.00 ± 1.41 (n=2)"
    families = {c.identity[2]: c.family for c in s.comparisons}  # judged: registered; not judged: described
    assert families[f"{T1}: GR-OPD (λ=0.25, γ=0.99)"] == "registered"
    assert families[f"{T1}: GR-OPD (λ=0.5, γ=0.99)"] == "described"


# --- the page ----------------------------------------------------------------------------------


def test_page_summary_rules_missing_and_provenance(beats_world):
    paths = build(
        ["claims"],
        profile="tiny",
        results_root=beats_world / "results",
        experiments_dir=beats_world / "experiments",
        out_root=beats_world / "out",
    )
    page = (beats_world / "out" / "tiny" / "claims.md").read_text()
    provenance = json.loads((beats_world / "out" / "tiny" / "claims.provenance.json").read_text())
    assert "| 1. GR-OPD beats vanilla OPD in every pairing | not reproduced | not reproduced in " + T2 + " |" in page
    assert "**Rule.** Per pairing: reproduced when vanilla OPD collapsed" in page
    assert "needs ≥ 2 seeds with the number the rule reads (3 preferred)" in page  # {min_seeds} filled in
    assert "fell below 0.5 x the first 10%" in page and "{" not in page.split("## 0.")[1]
    assert "**The paper.** GR-OPD achieves a higher macro Avg@K" in page
    listed = [line[2:] for line in page.splitlines() if line.startswith("- `")]
    assert set(listed) == set(provenance["missing"]) and f"`table1__{P3}__opd`: collapsed at step 5" in listed
    names = {p.name for p in paths}
    assert names == {"claims.md", "claims.json", "claims.provenance.json", "index.html", "index.provenance.json"}


def test_the_page_names_each_comparisons_family_and_adjusts_the_registered_one_by_holm(tmp_path):
    """GR-OPD − vanilla OPD is 2, 3, 4 on both matched non-thinking pairings: mean 3, s = 1, t = 3√3 on 2 df, whose
    two-sided p is 1 − t / √(t² + 2) = 1 − √(27/29) = 0.0351 (the t distribution on 2 df in closed form): each
    interval [3 ± 4.3027 / √3] = [+0.52, +5.48] excludes 0, both cells reproduced. Claims 1 and 2 read the same two
    differences, counted once. The family is the registration's, m = 28 (experiments/registration.yaml): these two
    and 26 cells not run here, each a member not resolved (p 1). Holm: the smaller p x 28 = 0.983, the larger x 27 =
    0.948, raised to 0.983: neither is resolved after Holm, and claims 1 and 2 would not be reproduced."""
    write_experiments(tmp_path, grids={**ONLY, "table1": table1_grid(P1, P2)})
    for pairing in (P1, P2):
        scored(tmp_path, f"table1__{pairing}__gropd", [12.0, 13.0, 14.0])
        scored(tmp_path, f"table1__{pairing}__opd", [10.0, 10.0, 10.0])
    page = claims(evidence(tmp_path)).files["claims.md"]
    p = 1 - math.sqrt(27 / 29)
    p_text, holm_text = f"{p:.2g}", f"{28 * p:.2g}"
    assert (p_text, holm_text) == ("0.035", "0.98")
    assert "**Registered** (28 members, a number experiments/registration.yaml fixes" in page
    assert "of the 2 registered differences whose interval excludes 0, 0 stay resolved after Holm" in page
    difference = "+3.00 [+0.52, +5.48] (n=3)"
    family_row = (
        f"| Macro, {T1}: GR-OPD (λ=0.25, γ=0.99) − vanilla OPD | 1, 2 | {difference} | {p_text} | {holm_text} |"
    )
    assert family_row + " not resolved |" in page
    after = f"| reproduced in {T1}, {T2} | not reproduced: not resolved in {T1}, {T2} |"
    assert "| 1. GR-OPD beats vanilla OPD in every pairing | reproduced " + after in page
    assert "| 2. The matched non-thinking pairings gain about 11 macro points | reproduced " + after in page
    assert "| 3. Vanilla OPD collapses under mismatched thinking patterns; GR-OPD stays stable | not tested |" in page
    better = "GR-OPD better (5.2 se from 0)"  # 3 / (1/√3)
    cells = f"| {difference} | registered | p {p_text}, Holm {holm_text} | {better} | reproduced |"
    assert f"| {T1} | GR-OPD (λ=0.25, γ=0.99) vs vanilla OPD | 13.00 ± 1.00 (n=3) | 10.00 ± 0.00 (n=3) {cells}" in page


def test_a_claim_is_added_by_report_yaml_alone(beats_world):
    """A second use of an existing rule, on other pairings, is one YAML entry in report.yaml and one in
    registration.yaml (its comparisons, dated); without the registration entry it is refused naming registration.yaml
    and the key; an unknown rule or wording is refused naming report.yaml and the key."""
    path = beats_world / "experiments" / "report.yaml"
    report = yaml.safe_load(path.read_text())
    extra = {"key": "X", "title": "Cross-pattern pairings only", "paper": "Ours.", "rule": "beats"}
    report["claims"].append({**extra, "grids": ["table1"], "pairings": "cross"})
    dump(path, report)
    with pytest.raises(ConfigError, match=r"registration.yaml: claims.X: missing"):
        claims(evidence(beats_world))
    registration_path = beats_world / "experiments" / "registration.yaml"
    registration = yaml.safe_load(registration_path.read_text())
    dated = {"commit": "abcdef1", "date": "2026-12-07T00:00:00+00:00"}
    registration["claims"]["X"] = {"members": 0, "comparisons": "per cross-pattern pairing", **dated}
    dump(registration_path, registration)
    page = claims(evidence(beats_world)).files["claims.md"]
    assert f"| X. Cross-pattern pairings only | reproduced | reproduced in {T3} |" in page
    assert '\n<a id="claim-X"></a>\n\n## X. Cross-pattern pairings only\n' in page  # what README's links name
    report["claims"][-1]["rule"] = "no_such_rule"
    dump(path, report)
    with pytest.raises(ConfigError, match=rf"report.yaml: claims\[{len(report['claims']) - 1}\].rule: 'no_such_rule'"):
        claims(evidence(beats_world))
    report["claims"][-1]["rule"] = "beats"
    report["rules"]["beats"] = "Beats by {a_threshold_that_does_not_exist}."
    dump(path, report)
    with pytest.raises(ConfigError, match="a_threshold_that_does_not_exist"):
        claims(evidence(beats_world))


def test_a_verdict_within_one_standard_error_of_its_threshold_is_marked_fragile():
    """experiments/TINY.md, round 6, rule 3. Reward (0.30, 0.15) with window errors (0.01, 0.02): ratio 0.5, error
    hypot(0.02 / 0.30, 0.5 x 0.01 / 0.30) = 0.069 straddles 0.5; (0.30, 0.30) at the same errors does not."""
    from gropd.report.verdicts import borderline, combine, contrast

    def trend(reward, error, collapse=None):
        return Trend(None, reward, None, 200, collapse, None, error)

    assert borderline(trend((0.30, 0.15), (0.01, 0.02)), LIMITS) == "reward ratio 0.50 ± 0.07 against 0.5"
    assert borderline(trend((0.30, 0.30), (0.01, 0.02)), LIMITS) == ""
    assert borderline(trend((0.30, 0.15), (0.01, 0.02), collapse=4), LIMITS) == ""  # a collapse is no ratio
    assert (
        borderline(Trend((40.0, 101.0), None, None, 200, None, (1.0, 4.0), None), LIMITS)
        == "length / cap 0.51 ± 0.02 against 0.5"
    )
    bad, good = [True, True, True], {"G": [False, False, True]}
    plain = contrast(bad, good, "O", LIMITS)
    assert plain.outcome == "not reproduced" and plain.fragile == ""
    near = {"O": ["", "", ""], "G": ["", "", "reward ratio 0.49 ± 0.06 against 0.5"]}
    assert contrast(bad, good, "O", LIMITS, near) == Verdict(  # the reading in force: within_one_se
        "undecided at this n",
        "undecided at this n: G also unstable in 1 of 3 seeds (within one standard error of a threshold: G seed 2: "
        "reward ratio 0.49 ± 0.06 against 0.5)",
        "within one standard error of a threshold: G seed 2: reward ratio 0.49 ± 0.06 against 0.5",
    )
    near_good = contrast(bad, good, "O", replace(LIMITS, undecided=False), near)  # as first registered (round 6)
    assert (near_good.outcome, near_good.reason) == (
        "not reproduced",
        "G also unstable in 1 of 3 seeds (**fragile**, within one standard error of a threshold: G seed 2: reward "
        "ratio 0.49 ± 0.06 against 0.5)",
    )
    near_bad = contrast(
        bad, good, "O", replace(LIMITS, undecided=False), {"O": ["r", "", ""], "G": ["", "", ""]}
    )  # O stays unstable in 2 of 3
    assert near_bad.fragile == "" and near_bad == plain
    summary = combine({"A": near_good, "B": plain})
    assert summary.outcome == "not reproduced" and summary.reason == "not reproduced in A, B (**fragile** in A)"


def test_a_share_of_the_gap_within_one_standard_error_of_its_fraction_is_undecided_at_this_n():
    """Student 9, 10, 11, teacher 39, 40, 41 (gap 30); trained 19.5, 20.5, 21.5: lift 10.5, Welch se √(2/3) = 0.8165
    (12.9 se from 0, half-width 2.776445 x 0.8165 = 2.27); share 0.35 with the delta method's se √((1/30)² / 3 +
    (10.5/900)² / 3 + (19.5/900)² / 3) = 0.02392: (0.35 − 1/3) / 0.02392 = 0.70 se above a third, within one: undecided
    at this n; 3 / 0.6967² = 6.2, so about 7 runs a group would put it one standard error away. As first registered
    (the fragile mark): reproduced, marked fragile."""
    from gropd.report.stats import gap_share

    trained, student, teacher = [19.5, 20.5, 21.5], [9.0, 10.0, 11.0], [39.0, 40.0, 41.0]
    gain, share = lift(dict(enumerate(trained)), student), gap_share(trained, student, teacher)
    why = "the share of the gap within one standard error of 0.33; about 7 runs in each group (trained seeds, "
    why += "evaluations) would put it one standard error away (now 3)"
    text = "lift +10.50 [+8.23, +12.77] (n=3 vs 3, Welch) (12.9 se from 0) = 0.35 of the gap 30.00 (0.7 se above 0.33)"
    assert distillation(10.0, 40.0, gain, 0, LIMITS, share) == Verdict(
        "undecided at this n", f"undecided at this n: {text} ({why})", why
    )
    first = distillation(10.0, 40.0, gain, 0, replace(LIMITS, undecided=False), share)
    assert (first.outcome, first.reason) == ("reproduced", f"{text} (**fragile**, {why})")


def test_better_than_opd_below_the_untrained_student(tmp_path):
    """I4think→B1.7: GR-OPD 20, 21, 22 against vanilla OPD 10, 12, 11: differences 10, 9, 11, GR-OPD better; the
    untrained student (B1.7, three evaluations) 30, 31, 32: GR-OPD − the student −10, Welch se √(2/3), df 4:
    [−10 ± 2.776445 x 0.8165] = [−12.27, −7.73], the untrained student better: 'better than vanilla OPD, below the
    untrained student'."""
    table6 = {"kind": "eval", "seeds": [0], "include": [{"model": "B1.7", "mode": "default"}]}
    write_experiments(tmp_path, grids={**ONLY, "table1": table1_grid(P3), "table6": table6})
    scored(tmp_path, "table6__B1.7-default", [30.0, 31.0, 32.0])
    scored(tmp_path, f"table1__{P3}__gropd", [20.0, 21.0, 22.0])
    scored(tmp_path, f"table1__{P3}__opd", [10.0, 12.0, 11.0])
    reason = bullets(section(tmp_path, "1"))[T3]
    assert reason.startswith("reproduced — GR-OPD better (")
    assert "; better than vanilla OPD, below the untrained student: GR-OPD's mean Macro 21.00 against the " in reason
    assert (
        "GR-OPD − the untrained student: -10.00 [-12.27, -7.73] (n=3 vs 3, Welch), the untrained student better"
        in reason
    )


def test_a_difference_another_claim_reads_reversed_is_one_comparison(tmp_path):
    """Claim 3's paired Macro beside its instability verdict, vanilla OPD − GR-OPD on I4think→B1.7, is claim 1's
    registered GR-OPD − vanilla OPD reversed: shown as registered (Holm-adjusted), not counted again as described.
    Every run's Macro is 20: differences 0, 0."""
    write_cross(tmp_path, [0.1, 0.1], [0.3, 0.3])
    page = claims(evidence(tmp_path)).files["claims.md"]
    claim3 = page[page.index("## 3.") : page.index("## 4.")]
    assert (
        f"| {T3} | vanilla OPD − GR-OPD (λ=0, γ=0.99) | +0.00 [+0.00, +0.00] (n=2) | registered | p 1, Holm" in claim3
    )
    assert "**Described** (0 comparisons)" in page  # claim 3's two (I4think→B1.7, I32think→B1.7) are claim 1's

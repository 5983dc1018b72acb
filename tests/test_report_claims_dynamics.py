"""The claims page (gropd.report.claims) on results fixtures, claims 3–6 (training dynamics and pressure):
every verdict, with the numbers derived by hand. No training: the fixtures are status.json,
metrics.jsonl and summary.json files.

Run ids follow gropd.config.grids; seeds beyond a grid's own (`--seeds N`) are found on disk.
"""

from __future__ import annotations

import pytest
from report_fixtures import (
    P1,
    P2,
    P3,
    macro_summary,
    metric_rows,
    report_context,
    seeded,
    table1_grid,
    write_experiments,
    write_run,
)

from gropd.report.claim_dynamics import collapse_section, gamma_section, lambda_section, pressure_sections
from gropd.report.verdicts import instability

T1, T2, T3 = "I4nothink→I1.7nothink", "I32nothink→I1.7nothink", "I4think→B1.7"
TINY_CONFIG = {"train": {"prompts_per_batch": 8}, "sampling": {"max_new_tokens": 200}}


# --- 3. collapse under mismatched thinking patterns -----------------------------------------


def write_cross(root, gropd_states: list[str], opd_states: list[str]) -> None:
    """P3 runs: OPD lengths 50, 40, 20, 5 up to a collapse at step 4; GR-OPD 10 steps, length 50 → 41."""
    write_experiments(root, grids={"table1": table1_grid(P3)})
    res = root / "results"
    degenerate = {0: [2] * 10, 1: [0] * 8 + [8] * 2}  # shares 2/8 = 0.25 and 1.6/8 = 0.20
    for seed, state in enumerate(gropd_states):
        metrics = metric_rows(
            10, mean_response_len=lambda s: 51.0 - s, degenerate_groups=degenerate[seed], verifier_reward=0.1
        )
        write_run(
            res,
            "tiny",
            seeded(f"table1__{P3}__gropd", seed),
            state,
            fields={"pairing": P3, "method": "gropd"},
            metrics=metrics,
            config=TINY_CONFIG,
            collapse_step=10 if state == "collapsed" else None,
            eval_summary=macro_summary(6.0 + seed) if state == "finished" else None,
        )
    for seed, state in enumerate(opd_states):
        metrics = metric_rows(4, mean_response_len=[50.0, 40.0, 20.0, 5.0], degenerate_groups=0, verifier_reward=0.1)
        write_run(
            res,
            "tiny",
            seeded(f"table1__{P3}__opd", seed),
            state,
            fields={"pairing": P3, "method": "opd"},
            metrics=metrics,
            config=TINY_CONFIG,
            collapse_step=4 + seed if state == "collapsed" else None,
            eval_summary=macro_summary(3.0) if state == "finished" else None,
        )


def test_collapse_reproduced_with_length_trend_and_sigma_share(tmp_path):
    write_cross(tmp_path, ["finished", "finished"], ["collapsed", "collapsed"])
    section = collapse_section(report_context(tmp_path))
    text = "\n".join(section.evidence)
    # 4 steps: first/last 10% = one step each; 10 steps: likewise (ceil(0.1 x 10) = 1).
    assert f"| {T3} | vanilla OPD | 0 | collapsed at step 4 | 50.0 → 5.0 | — | Collapse |" in text
    assert f"| {T3} | vanilla OPD | 1 | collapsed at step 5 | 50.0 → 5.0 | — | Collapse |" in text
    assert f"| {T3} | GR-OPD (λ=0, γ=0.99) | 0 | finished | 50.0 → 41.0 | 0.25 | 6.00 |" in text
    assert f"| {T3} | GR-OPD (λ=0, γ=0.99) | 1 | finished | 50.0 → 41.0 | 0.20 | 7.00 |" in text
    assert section.verdict.outcome == "reproduced"
    assert f"- {T3}: reproduced — vanilla OPD collapsed in 2 of 2 seeds, GR-OPD in 0 of 2" in text


@pytest.mark.parametrize(
    "gropd_states, opd_states, outcome, reason",
    [
        (
            ["finished", "collapsed"],
            ["collapsed", "collapsed"],
            "not reproduced",
            "GR-OPD also collapsed in 1 of 2 seeds",
        ),
        (
            ["finished", "finished"],
            ["collapsed", "finished"],
            "not reproduced",
            "vanilla OPD collapsed in only 1 of 2 seeds",
        ),
        (
            ["finished"],
            ["collapsed", "collapsed"],
            "not tested",
            f"needs ≥ 2 usable seeds per setting (GR-OPD has 1); missing runs: `table1__{P3}__gropd` seeds 1, 2; "
            f"`table1__{P3}__opd` seed 2 (`./reproduce.sh table1 --seeds 3`)",
        ),
    ],
)
def test_collapse_not_reproduced_and_not_tested(tmp_path, gropd_states, opd_states, outcome, reason):
    write_cross(tmp_path, gropd_states, opd_states)
    section = collapse_section(report_context(tmp_path))
    assert f"- {T3}: {outcome} — {reason}" in section.evidence


# --- 4. large λ ------------------------------------------------------------------------------

FALLING = [0.4] * 9 + [0.1]  # first 10% 0.4, last 10% 0.1 < 0.5 x 0.4
GROWING = [50.0] * 9 + [150.0]  # last 10% 150 ≥ 0.5 x cap 200
STEADY, COLLAPSED = ("finished", 0.4, 50.0), ("collapsed", 0.4, 50.0)


def write_lambda(root, runs: dict[float, list[tuple[str, list, list]]]) -> None:
    """P1 GR-OPD runs of grid lambda: λ -> per seed (state, rewards, lengths) over 10 steps."""
    write_experiments(
        root,
        grids={
            "lambda": {
                "kind": "train",
                "seeds": [0],
                "include": [{"pairing": P1, "method": "gropd", "gropd.lam": lam} for lam in runs],
            }
        },
    )
    for lam, seeds in runs.items():
        for seed, (state, reward, length) in enumerate(seeds):
            write_run(
                root / "results",
                "tiny",
                seeded(f"lambda__{P1}__gropd-lam{lam:g}", seed),
                state,
                fields={"pairing": P1, "method": "gropd", "lam": lam, "gamma": 0.99},
                metrics=metric_rows(10, verifier_reward=reward, mean_response_len=length),
                config=TINY_CONFIG,
                collapse_step=10 if state == "collapsed" else None,
            )


def test_large_lambda_unstable_smaller_stable(tmp_path):
    write_lambda(
        tmp_path,
        {
            0.5: [("finished", FALLING, 50.0), ("finished", 0.4, GROWING)],
            0.25: [("finished", 0.4, 50.0), ("finished", 0.4, 50.0)],
        },
    )
    section = lambda_section(report_context(tmp_path))
    text = "\n".join(section.evidence)
    flat = "50.0 → 50.0 (cap 200) | 0.400 → 0.400 | — | —"
    falling = "50.0 → 50.0 (cap 200) | 0.400 → 0.100 | — | — | reward 0.400 → 0.100"
    growing = "50.0 → 150.0 (cap 200) | 0.400 → 0.400 | — | — | length 50.0 → 150.0 of cap 200"
    assert f"| {T1} | 0.5 | 0.99 | 0 | finished | {falling} |" in text
    assert f"| {T1} | 0.5 | 0.99 | 1 | finished | {growing} |" in text
    assert f"| {T1} | 0.25 | 0.99 | 0 | finished | {flat} | stable |" in text
    assert f"- {T1}, λ=0.5 vs smaller λ (γ=0.99): reproduced — λ=0.5 unstable in 2 of 2 seeds, λ=0.25 in 0 of 2" in text
    assert section.verdict.outcome == "reproduced"


@pytest.mark.parametrize(
    "runs, outcome, reason",
    [
        ({0.5: [STEADY, STEADY], 0.25: [STEADY, STEADY]}, "not reproduced", "λ=0.5 unstable in only 0 of 2 seeds"),
        (
            {0.5: [COLLAPSED, COLLAPSED], 0.25: [STEADY, COLLAPSED]},
            "not reproduced",
            "λ=0.25 also unstable in 1 of 2 seeds",
        ),
        (
            {0.5: [COLLAPSED], 0.25: [STEADY]},
            "not tested",
            "needs ≥ 2 usable seeds per setting (λ=0.5 has 1; λ=0.25 has 1); missing runs: "
            f"`lambda__{P1}__gropd-lam0.5` seeds 1, 2; `lambda__{P1}__gropd-lam0.25` seeds 1, 2 "
            "(`./reproduce.sh table2 --seeds 3`)",
        ),
    ],
)
def test_large_lambda_not_reproduced_and_not_tested(tmp_path, runs, outcome, reason):
    write_lambda(tmp_path, runs)
    section = lambda_section(report_context(tmp_path))
    assert f"- {T1}, λ=0.5 vs smaller λ (γ=0.99): {outcome} — {reason}" in section.evidence


def test_instability_thresholds_are_strict():
    assert instability(False, (0.4, 0.2), None, None) == []  # exactly half: not below it
    assert instability(False, (0.4, 0.19), None, None) == ["reward 0.400 → 0.190"]
    assert instability(False, None, (50.0, 100.0), 200) == ["length 50.0 → 100.0 of cap 200"]
    assert instability(False, None, (50.0, 99.0), 200) == []
    assert instability(False, None, (120.0, 110.0), 200) == []  # near the cap but not grown
    assert instability(True, (0.0, 0.0), None, None) == ["collapsed"]


# --- 5. γ = 1 -------------------------------------------------------------------------------


def write_gamma(root, flat_reward: list[float | list[float]], seeds: int = 2) -> None:
    """P2 λ=0.2, 20 steps: γ = 1 length 50 + 5(s − 1), Pearson 0.1 then 0.8; γ = .99 flat length, reward as given."""
    write_experiments(
        root,
        grids={
            "gamma": {
                "kind": "train",
                "seeds": [0],
                "matrix": {"pairing": [P2], "method": ["gropd"], "gropd.lam": [0.2], "gropd.gamma": [0.99, 1.0]},
            }
        },
    )
    for seed in range(seeds):
        for gamma, length, reward in ((1.0, lambda s: 50.0 + 5 * (s - 1), 0.4), (0.99, 50.0, flat_reward[seed])):
            metrics = metric_rows(
                20,
                mean_response_len=length,
                verifier_reward=reward,
                pearson_score_len=[0.1] * 10 + [0.8] * 10 if gamma == 1.0 else 0.0,
                spearman_score_reward=0.3,
            )
            write_run(
                root / "results",
                "tiny",
                seeded(f"gamma__{P2}__gropd-lam0.2-gamma{gamma:g}", seed),
                fields={"pairing": P2, "method": "gropd", "lam": 0.2, "gamma": gamma},
                metrics=metrics,
                config=TINY_CONFIG,
            )


def test_gamma_one_unstable_with_correlations(tmp_path):
    write_gamma(tmp_path, [0.4, 0.4])
    section = gamma_section(report_context(tmp_path))
    text = "\n".join(section.evidence)
    # 20 steps: first/last 10% = 2 steps: lengths (50 + 55)/2 = 52.5 and (140 + 145)/2 = 142.5 ≥ 100.
    assert (
        f"| {T2} | 0.2 | 1 | 0 | finished | 52.5 → 142.5 (cap 200) | 0.400 → 0.400 | 0.10 → 0.80 | 0.30 → 0.30 "
        "| length 52.5 → 142.5 of cap 200 |"
    ) in text
    flat = "50.0 → 50.0 (cap 200) | 0.400 → 0.400 | 0.00 → 0.00 | 0.30 → 0.30"
    assert f"| {T2} | 0.2 | 0.99 | 1 | finished | {flat} | stable |" in text
    assert f"- {T2}, λ=0.2: reproduced — γ=1 unstable in 2 of 2 seeds, γ=0.99 in 0 of 2" in text


@pytest.mark.parametrize(
    "rewards, seeds, outcome, reason",
    [
        ([0.4, [0.4] * 18 + [0.1, 0.1]], 2, "not reproduced", "γ=0.99 also unstable in 1 of 2 seeds"),
        (
            [0.4],
            1,
            "not tested",
            f"needs ≥ 2 usable seeds per setting (γ=1 has 1; γ=0.99 has 1); missing runs: "
            f"`gamma__{P2}__gropd-lam0.2-gamma0.99` seeds 1, 2; `gamma__{P2}__gropd-lam0.2-gamma1` seeds 1, 2 "
            "(`./reproduce.sh fig4 --seeds 3`)",
        ),
    ],
)
def test_gamma_not_reproduced_and_not_tested(tmp_path, rewards, seeds, outcome, reason):
    write_gamma(tmp_path, rewards, seeds)
    section = gamma_section(report_context(tmp_path))
    assert f"- {T2}, λ=0.2: {outcome} — {reason}" in section.evidence


# --- 6. pressure ----------------------------------------------------------------------------


def write_pressure(
    root, normalised: dict[tuple[str, float], list[list[float]]], retained: dict[tuple[str, float], list[list[float]]]
) -> None:
    """GR-OPD runs of grid lambda: (pairing, λ) -> per seed the logged pressure values."""
    write_experiments(
        root,
        grids={
            "lambda": {
                "kind": "train",
                "seeds": [0],
                "include": [{"pairing": pairing, "method": "gropd", "gropd.lam": lam} for pairing, lam in normalised],
            }
        },
    )
    for (pairing, lam), seeds in normalised.items():
        for seed, values in enumerate(seeds):
            metrics = metric_rows(
                len(values), pressure_normalised=values, pressure_retained=retained[(pairing, lam)][seed]
            )
            write_run(
                root / "results",
                "tiny",
                seeded(f"lambda__{pairing}__gropd-lam{lam:g}", seed),
                fields={"pairing": pairing, "method": "gropd", "lam": lam, "gamma": 0.99},
                metrics=metrics,
            )


NORMALISED = {
    (P1, 0.5): [[3.0, 3.0], [3.2, 3.2]],
    (P1, 0.25): [[3.1, 3.1], [3.3, 3.3]],
    (P3, 0.0): [[6.8, 7.2], [7.2, 7.6]],
}
RETAINED = {
    (P1, 0.5): [[1.5, 1.5], [1.6, 1.6]],
    (P1, 0.25): [[0.775, 0.775], [0.825, 0.825]],
    (P3, 0.0): [[0.0, 0.0], [0.0, 0.0]],
}


def test_pressure_cross_above_matched_and_lambda_orders_retained(tmp_path):
    write_pressure(tmp_path, NORMALISED, RETAINED)
    cross, retained = pressure_sections(report_context(tmp_path))
    text = "\n".join(cross.evidence)
    # per-run means 7.0 and 7.4: 7.20 ± 0.28; 3.0/3.2: 3.10 ± 0.14 (retained 1.55 ± 0.07).
    assert f"| {T3} | cross-pattern | 0 | 0.99 | 7.20 ± 0.28 (n=2) | 0.00 ± 0.00 (n=2) |" in text
    assert f"| {T1} | matched | 0.5 | 0.99 | 3.10 ± 0.14 (n=2) | 1.55 ± 0.07 (n=2) |" in text
    assert f"| {T1} | matched | 0.25 | 0.99 | 3.20 ± 0.14 (n=2) | 0.80 ± 0.04 (n=2) |" in text
    assert (cross.verdict.outcome, cross.verdict.reason) == ("reproduced", "every pair differs beyond noise")
    assert "7.23" in cross.paper and "3.16" in cross.paper  # the paper's Table 2, quoted
    # λ = 0.25 -> 0.5: 1.55 − 0.80 = 0.75 > 2 x 0.0707.
    assert f"- {T1} γ=0.99: reproduced — each step up is beyond noise" in retained.evidence
    assert retained.verdict.outcome == "reproduced"


def test_pressure_not_reproduced(tmp_path):
    normalised = {**NORMALISED, (P3, 0.0): [[3.1, 3.1], [3.3, 3.3]]}  # cross 3.2 ± 0.14 vs matched 3.1 ± 0.14
    retained = {**RETAINED, (P1, 0.5): [[0.8, 0.8], [0.9, 0.9]]}  # 0.85 ± 0.071 vs 0.80 ± 0.035
    write_pressure(tmp_path, normalised, retained)
    cross, by_lambda = pressure_sections(report_context(tmp_path))
    assert cross.verdict.outcome == "not reproduced"
    assert cross.verdict.reason == f"{T1} λ=0.5 γ=0.99 vs {T3} λ=0 γ=0.99: within noise (+0.10, 0.28)"
    assert f"- {T1} γ=0.99: not reproduced — λ=0.5 not above λ=0.25 beyond noise (+0.05, 0.14)" in by_lambda.evidence


def test_pressure_not_tested_with_one_seed(tmp_path):
    write_pressure(
        tmp_path,
        {key: seeds[:1] for key, seeds in NORMALISED.items()},
        {key: seeds[:1] for key, seeds in RETAINED.items()},
    )
    cross, by_lambda = pressure_sections(report_context(tmp_path))
    assert cross.verdict.outcome == by_lambda.verdict.outcome == "not tested"
    assert f"`lambda__{P3}__gropd-lam0` seeds 1, 2" in cross.verdict.missing_runs
    assert "(`./reproduce.sh table2 --seeds 3`)" in cross.verdict.text

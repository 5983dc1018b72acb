"""Claims read from training dynamics (metrics.jsonl): vanilla OPD collapses under mismatched thinking
patterns while GR-OPD stays stable (3), large λ (4) and γ = 1 (5) destabilise training, and the
pressure proxies of Table 2 (6). Grids table1, lambda and gamma.

Trends compare the mean of a metric over the first and the last TREND_FRACTION of a run's logged
steps (a collapsed run up to its collapse).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass

from gropd.report.claim_page import (
    Section,
    Setting,
    fixed,
    lacking,
    matched,
    name_missing,
    run_list,
    settings_of,
    stats_text,
    title,
    unusable_lines,
    verdict_bullets,
)
from gropd.report.claim_scores import final_scores
from gropd.report.context import ReportContext
from gropd.report.formats import pipe_table, plain
from gropd.report.labels import num
from gropd.report.loading import GridRun, grid_runs, series
from gropd.report.table2 import run_pressure
from gropd.report.verdicts import (
    LARGE_LAMBDA,
    RULES,
    Verdict,
    all_pairs_exceed,
    combine,
    contrast,
    instability,
    ordered_increasing,
    trend_window,
)
from gropd.runs.lifecycle import TRAINING_ENDED


@dataclass(frozen=True)
class Trend:
    """One run's dynamics: (first, last) means of length, reward and the two correlations (None: not
    logged), the mean σ = 0 share (None: not applicable), the length cap and why it is unstable."""

    length: tuple[float, float] | None
    reward: tuple[float, float] | None
    pearson: tuple[float, float] | None
    spearman: tuple[float, float] | None
    sigma0: float | None
    cap: int | None
    unstable: list[str]


def first_last(rows: list[dict], key: str) -> tuple[float, float] | None:
    """Mean of `key` over the first and over the last TREND_FRACTION of its logged values."""
    _, values = series(rows, key)
    if not values:
        return None
    k = trend_window(len(values))
    return statistics.fmean(values[:k]), statistics.fmean(values[-k:])


def run_trend(run: GridRun) -> Trend:
    """The Trend of one run from its metrics.jsonl and resolved config.yaml."""
    rows, config = run.metrics(), run.config()
    prompts = (config.get("train") or {}).get("prompts_per_batch")
    cap = (config.get("sampling") or {}).get("max_new_tokens")
    _, degenerate = series(rows, "degenerate_groups")
    applies = degenerate and prompts and run.field("method") == "gropd"
    sigma0 = statistics.fmean(degenerate) / prompts if applies else None
    length, reward = first_last(rows, "mean_response_len"), first_last(rows, "verifier_reward")
    return Trend(
        length=length,
        reward=reward,
        pearson=first_last(rows, "pearson_score_len"),
        spearman=first_last(rows, "spearman_score_reward"),
        sigma0=sigma0,
        cap=cap,
        unstable=instability(run.state == "collapsed", reward, length, cap),
    )


def arrow(pair: tuple[float, float] | None, decimals: int) -> str:
    return "—" if pair is None else f"{pair[0]:.{decimals}f} → {pair[1]:.{decimals}f}"


def ended(runs: list[GridRun]) -> list[GridRun]:
    """The runs whose training ended (finished, trained or collapsed)."""
    return [run for run in runs if run.state in TRAINING_ENDED]


def state_text(run: GridRun) -> str:
    return f"collapsed at step {run.status.get('collapse_step')}" if run.state == "collapsed" else run.state


def collapse_section(ctx: ReportContext) -> Section:
    """Section 3: per cross-pattern pairing, method and seed: collapse, length trend, σ = 0 share, final macro."""
    suites, decimals = list(ctx.section("suites")), ctx.settings.table1.decimals
    settings = [
        s for s in settings_of(grid_runs(ctx, "table1"), "table1", ctx.train_defaults()) if not matched(ctx, s.pairing)
    ]
    rows, verdicts, missing = [], {}, []
    for pairing in dict.fromkeys(s.pairing for s in settings):
        by_method = {s.params.method: s for s in settings if s.pairing == pairing}
        if "gropd" not in by_method or "opd" not in by_method:
            continue
        flags = {}
        for method, s in sorted(by_method.items(), key=lambda item: item[0] != "opd"):
            scores = final_scores(s.runs, suites)
            flags[method] = [run.state == "collapsed" for run in ended(s.runs)]
            for run in s.runs:
                trend = run_trend(run) if run.state != "not run" else None
                final = "Collapse" if run.state == "collapsed" else fixed(scores.values.get(run.run_id), decimals)
                rows.append(
                    [
                        title(ctx, pairing),
                        s.label(),
                        str(run.field("seed", 0)),
                        state_text(run),
                        arrow(trend.length, 1) if trend else "—",
                        fixed(trend.sigma0) if trend and trend.sigma0 is not None else "—",
                        final,
                    ]
                )
            missing += unusable_lines(s.runs, {run.run_id for run in ended(s.runs)})
        verdict = contrast(flags["opd"], {"GR-OPD": flags["gropd"]}, "vanilla OPD", "collapsed")
        usable = {run.run_id for s in by_method.values() for run in ended(s.runs)}
        needs = {"table1": lacking(ctx, list(by_method.values()), usable)}
        verdicts[title(ctx, pairing)] = name_missing(verdict, needs)
    header = ["pairing", "method", "seed", "state", "length, first → last 10%", "σ = 0 share", "final Macro"]
    evidence = ["Grid table1, cross-pattern pairings (teacher and student in different modes).", ""]
    evidence += pipe_table(header, [plain(row) for row in rows])
    evidence += [""] + verdict_bullets(verdicts)
    return Section(
        key="3",
        title="Vanilla OPD collapses under mismatched thinking patterns; GR-OPD stays stable",
        paper="The paper: with a thinking teacher and a base student (I4think→B1.7), vanilla OPD collapses "
        "while GR-OPD trains stably.",
        rule=RULES["collapse"],
        evidence=evidence + run_list(ctx, settings),
        verdict=combine(verdicts),
        runs=[run for s in settings for run in s.runs],
        missing=missing,
    )


def dynamics_rows(ctx: ReportContext, s: Setting) -> tuple[list[list[str]], list[bool]]:
    """Per run of a setting: (pairing, λ, γ, seed, state, length, reward, correlations, unstable), and the
    instability flags of the runs whose training ended."""
    rows, flags = [], []
    for run in s.runs:
        trend = run_trend(run) if run.state != "not run" else None
        if run.state in TRAINING_ENDED and trend is not None:
            flags.append(bool(trend.unstable))
        cap = f" (cap {trend.cap})" if trend and trend.cap else ""
        rows.append(
            [
                title(ctx, s.pairing),
                num(s.params.lam),
                num(s.params.gamma),
                str(run.field("seed", 0)),
                state_text(run),
                (arrow(trend.length, 1) + cap) if trend else "—",
                arrow(trend.reward, 3) if trend else "—",
                arrow(trend.pearson, 2) if trend else "—",
                arrow(trend.spearman, 2) if trend else "—",
                ("; ".join(trend.unstable) or "stable") if trend and run.state in TRAINING_ENDED else "—",
            ]
        )
    return rows, flags


DYNAMICS_HEADER = [
    "pairing",
    "λ",
    "γ",
    "seed",
    "state",
    "length, first → last 10%",
    "reward, first → last 10%",
    "Pearson(S, length)",
    "Spearman(S, reward)",
    "unstable?",
]


@dataclass
class SweepEvidence:
    """Rows of the dynamics table, verdict per compared group, unusable-run lines, settings compared."""

    rows: list[list[str]]
    verdicts: dict[str, Verdict]
    missing: list[str]
    used: list[Setting]


SYMBOLS = {"lam": "λ", "gamma": "γ"}


def sweep_contrasts(
    ctx: ReportContext,
    grid: str,
    knob: str,
    group_knob: str,
    unstable_when: Callable[[float], bool],
    label: Callable[[str, str, str], str],
) -> tuple[list[Setting], SweepEvidence]:
    """Claims 4 and 5: the GR-OPD settings of `grid`, grouped by (pairing, `group_knob`); in each group
    with settings on both sides, each setting whose `knob` value satisfies `unstable_when` is contrasted
    (verdicts.contrast) with the others: it unstable, they stable in every seed. A verdict is keyed by
    label(pairing title, e.g. "λ=0.5", e.g. "γ=0.99")."""
    settings = [s for s in settings_of(grid_runs(ctx, grid), grid, ctx.train_defaults()) if s.params.method == "gropd"]
    groups: dict[tuple[str, float], list[Setting]] = {}
    for s in settings:
        groups.setdefault((s.pairing, getattr(s.params, group_knob)), []).append(s)
    evidence = SweepEvidence([], {}, [], [])

    def name(s: Setting, key: str) -> str:
        return f"{SYMBOLS[key]}={num(getattr(s.params, key))}"

    for (pairing, _), members in groups.items():
        large = [s for s in members if unstable_when(getattr(s.params, knob))]
        if not large or len(large) == len(members):
            continue
        evidence.used += members
        flags = {}
        for s in sorted(members, key=lambda s: -getattr(s.params, knob)):
            setting_rows, flags[name(s, knob)] = dynamics_rows(ctx, s)
            evidence.rows += setting_rows
            evidence.missing += unusable_lines(s.runs, {run.run_id for run in ended(s.runs)})
        others = {key: seeds for key, seeds in flags.items() if key not in {name(s, knob) for s in large}}
        usable = {run.run_id for m in members for run in ended(m.runs)}
        for s in large:
            verdict = contrast(flags[name(s, knob)], others, name(s, knob), "unstable")
            key = label(title(ctx, pairing), name(s, knob), name(s, group_knob))
            evidence.verdicts[key] = name_missing(verdict, {grid: lacking(ctx, members, usable)})
    return settings, evidence


def lambda_section(ctx: ReportContext) -> Section:
    """Section 4: per pairing with λ ≥ LARGE_LAMBDA and smaller λ at one γ, is only the large λ unstable?"""
    settings, found = sweep_contrasts(
        ctx,
        "lambda",
        "lam",
        "gamma",
        lambda lam: lam >= LARGE_LAMBDA,
        lambda pairing, large, fixed: f"{pairing}, {large} vs smaller λ ({fixed})",
    )
    evidence = ["Grid lambda, GR-OPD runs; a collapsed run's trends end at its collapse.", ""]
    evidence += pipe_table(DYNAMICS_HEADER, [plain(row) for row in found.rows])
    evidence += [""] + verdict_bullets(found.verdicts)
    return Section(
        key="4",
        title="Too much retained pressure (large λ) destabilises training",
        rule=RULES["lambda"],
        paper=f"The paper: retaining too much of the collective teacher pressure (λ = {num(LARGE_LAMBDA)} on "
        "I4nothink→I1.7nothink, Figure 3(a)) destabilises training: length grows toward the cap, reward falls.",
        evidence=evidence + run_list(ctx, found.used),
        verdict=combine(found.verdicts),
        runs=[run for s in settings for run in s.runs],
        missing=found.missing,
    )


def gamma_section(ctx: ReportContext) -> Section:
    """Section 5: per (pairing, λ), γ = 1 unstable and γ < 1 stable (Figure 4)."""
    settings, found = sweep_contrasts(
        ctx, "gamma", "gamma", "lam", lambda gamma: gamma == 1.0, lambda pairing, large, fixed: f"{pairing}, {fixed}"
    )
    evidence = [
        "Grid gamma; Pearson(S, length) and Spearman(S, reward) are per-batch correlations (Figure 4 C, D), "
        "first → last 10% of steps.",
        "",
    ]
    evidence += pipe_table(DYNAMICS_HEADER, [plain(row) for row in found.rows])
    evidence += [""] + verdict_bullets(found.verdicts)
    return Section(
        key="5",
        title="An unrestricted horizon (γ = 1) destabilises training",
        rule=RULES["gamma"],
        paper="The paper (Figure 4, I32nothink→I1.7nothink): with γ = 1 response length grows toward the cap and "
        "verifier reward falls, S tracks length (Pearson) rather than correctness (Spearman); γ = .99 stays stable.",
        evidence=evidence + run_list(ctx, found.used),
        verdict=combine(found.verdicts),
        runs=[run for s in settings for run in s.runs],
        missing=found.missing,
    )


def pressure_cells(ctx: ReportContext) -> tuple[list[Setting], dict[str, dict[str, dict[str, float]]], list[str]]:
    """GR-OPD settings of grid lambda, per setting label the per-run pressure means, and the unusable lines."""
    settings = [
        s for s in settings_of(grid_runs(ctx, "lambda"), "lambda", ctx.train_defaults()) if s.params.method == "gropd"
    ]
    cells, missing = {}, []
    for s in settings:
        means = {}
        for run in ended(s.runs):
            result = run_pressure(run)
            if isinstance(result, str):
                missing.append(f"run {run.run_id}: {result}")
            else:
                means[run.run_id] = result[0]
        cells[cell_name(ctx, s)] = means
        missing += unusable_lines(s.runs, set(means) | {r.run_id for r in ended(s.runs)})
    return settings, cells, missing


def cell_name(ctx: ReportContext, s: Setting) -> str:
    return f"{title(ctx, s.pairing)} λ={num(s.params.lam)} γ={num(s.params.gamma)}"


def pressure_values(cells: dict, s_name: str, key: str) -> list[float]:
    return [means[key] for means in cells[s_name].values()]


def pressure_evidence(ctx: ReportContext, settings: list[Setting], cells: dict) -> list[str]:
    """The table of per-cell normalised and retained pressure (mean ± std over seeds)."""
    decimals = ctx.settings.table2.decimals
    rows = [
        plain(
            [
                title(ctx, s.pairing),
                "matched" if matched(ctx, s.pairing) else "cross-pattern",
                num(s.params.lam),
                num(s.params.gamma),
                stats_text(pressure_values(cells, cell_name(ctx, s), "pressure_normalised"), decimals),
                stats_text(pressure_values(cells, cell_name(ctx, s), "pressure_retained"), decimals),
            ]
        )
        for s in settings
    ]
    header = ["pairing", "pattern", "λ", "γ", "normalised pressure", "retained pressure"]
    return ["Grid lambda, GR-OPD runs; per run the mean over its logged steps (as Table 2).", ""] + pipe_table(
        header, rows
    )


def pressure_sections(ctx: ReportContext) -> list[Section]:
    """Sections 6a (cross-pattern > matched normalised pressure) and 6b (λ sets the retained share)."""
    settings, cells, missing = pressure_cells(ctx)
    usable = {run_id for means in cells.values() for run_id in means}
    evidence = pressure_evidence(ctx, settings, cells)
    cross = [
        (cell_name(ctx, s), pressure_values(cells, cell_name(ctx, s), "pressure_normalised"))
        for s in settings
        if not matched(ctx, s.pairing)
    ]
    same = [
        (cell_name(ctx, s), pressure_values(cells, cell_name(ctx, s), "pressure_normalised"))
        for s in settings
        if matched(ctx, s.pairing)
    ]
    verdict_a = name_missing(all_pairs_exceed(cross, same), {"lambda": lacking(ctx, settings, usable)})
    ordered = {}
    for pairing in dict.fromkeys(s.pairing for s in settings):
        members = sorted((s for s in settings if s.pairing == pairing), key=lambda s: (s.params.gamma, s.params.lam))
        for gamma in dict.fromkeys(s.params.gamma for s in members):
            same_gamma = [s for s in members if s.params.gamma == gamma]
            line = [
                (f"λ={num(s.params.lam)}", pressure_values(cells, cell_name(ctx, s), "pressure_retained"))
                for s in same_gamma
            ]
            if len(line) > 1:
                verdict = name_missing(ordered_increasing(line), {"lambda": lacking(ctx, same_gamma, usable)})
                ordered[f"{title(ctx, pairing)} γ={num(gamma)}"] = verdict
    refs = ctx.settings.paper_reference.table2
    top = max(refs, key=lambda r: r.lam, default=None)
    quote = "; ".join(f"{title(ctx, r.pairing)} λ={num(r.lam)}: {r.normalised:.2f} / {r.retained:.2f}" for r in refs)
    runs = [run for s in settings for run in s.runs]
    section_a = Section(
        key="6a",
        title="Cross-pattern runs show larger normalised pressure than matched runs",
        rule=RULES["pressure_cross"],
        paper=f"The paper (Table 2, normalised / retained pressure at γ = .99): {quote}.",
        evidence=evidence + ["", f"- {verdict_a.outcome} — {verdict_a.text}"] + run_list(ctx, settings),
        verdict=verdict_a,
        runs=runs,
        missing=missing,
    )
    section_b = Section(
        key="6b",
        title="λ controls how much of the pressure is retained",
        rule=RULES["pressure_lambda"],
        paper="The paper (Table 2's caption): λ controls how much of the normalised pressure is retained"
        + (
            f" (retained = λ x normalised, e.g. {top.normalised:.2f} x {num(top.lam)} = {top.retained:.2f})."
            if top
            else "."
        ),
        evidence=["See the table of 6a.", ""] + verdict_bullets(ordered),
        verdict=combine(ordered),
        runs=runs,
        missing=missing,
    )
    return [section_a, section_b]

"""Claims read from final held-out scores: does distillation work here (0), GR-OPD beats vanilla OPD
in every pairing (1), and the two matched non-thinking pairings' gains (2). Grids table1 and table6.

A seed's score is the Macro of its eval/summary.json (mean of the unrounded suite Avg@K); a collapsed
seed has none and counts as a collapse, as in Table 1.
"""

from __future__ import annotations

from dataclasses import dataclass

from gropd.report.claim_page import (
    Section,
    Setting,
    lacking,
    matched,
    name_missing,
    run_list,
    settings_of,
    signed,
    stats_text,
    title,
    unusable_lines,
    verdict_bullets,
)
from gropd.report.context import ReportContext
from gropd.report.formats import pipe_table, plain
from gropd.report.loading import GridRun, grid_runs, group_runs
from gropd.report.scores import finished_summaries, seed_stats, summary_macro
from gropd.report.verdicts import (
    PAIRED_CONFIDENCE,
    RULES,
    Verdict,
    beats,
    combine,
    comparison,
    distillation,
    paired_difference,
)


@dataclass(frozen=True)
class Scores:
    """The final macros of a setting's usable seeds and its collapsed seeds."""

    values: dict[str, float]
    collapsed: list[GridRun]

    @property
    def usable(self) -> set[str]:
        return set(self.values) | {run.run_id for run in self.collapsed}

    def text(self, decimals: int) -> str:
        collapsed = f", Collapse in {len(self.collapsed)} of {len(self.usable)}" if self.collapsed else ""
        return stats_text(list(self.values.values()), decimals) + collapsed


def final_scores(runs: list[GridRun], suites: list[str]) -> Scores:
    """Per run: its Macro when finished and fully scored; collapsed runs apart; the rest are unusable."""
    values, collapsed = {}, []
    for run in runs:
        if run.state == "collapsed":
            collapsed.append(run)
            continue
        summaries, _ = finished_summaries([run], suites)
        if summaries and (value := summary_macro(summaries[0], suites)) is not None:
            values[run.run_id] = value
    return Scores(values, collapsed)


def reference_macro(
    ctx: ReportContext, table6: dict[tuple, list[GridRun]], side: dict, suites: list[str]
) -> tuple[float | None, str, list[str]]:
    """Mean pre-OPD Macro of a (model, mode) over its table6 seeds, its text, and the table6 runs lacking."""
    runs = table6.get((side["model"], side["mode"]))
    if runs is None:
        return None, f"— (grid table6 has no {side['model']} {side['mode']} run)", []
    scores = final_scores(runs, suites)
    if not scores.values:
        return None, "— (not evaluated)", [f"`{run.run_id}`" for run in runs]
    values = list(scores.values.values())
    return seed_stats(values).mean, stats_text(values, ctx.settings.table1.decimals), []


def distillation_section(ctx: ReportContext) -> Section:
    """Section 0: per matched pairing and method, the lift of the trained student toward its teacher."""
    suites, decimals = list(ctx.section("suites")), ctx.settings.table1.decimals
    pairings = ctx.manifest("pairings")
    table6_runs = grid_runs(ctx, "table6")
    table6 = group_runs(table6_runs, "model", "mode")
    settings = [
        s for s in settings_of(grid_runs(ctx, "table1"), "table1", ctx.train_defaults()) if matched(ctx, s.pairing)
    ]
    rows, verdicts, missing = [], {}, []
    for s in settings:
        student, student_text, student_lack = reference_macro(ctx, table6, pairings[s.pairing]["student"], suites)
        teacher, teacher_text, teacher_lack = reference_macro(ctx, table6, pairings[s.pairing]["teacher"], suites)
        scores = final_scores(s.runs, suites)
        trained = list(scores.values.values())
        verdict = distillation(student, teacher, trained, len(scores.collapsed))
        needs = {"table6": student_lack + teacher_lack, "table1": lacking(ctx, [s], scores.usable)}
        verdict = name_missing(verdict, needs)
        lift = seed_stats(trained).mean - student if trained and student is not None else None
        gap = teacher - student if teacher is not None and student is not None else None
        share = f"{lift / gap:.2f}" if lift is not None and gap else "—"
        name = f"{title(ctx, s.pairing)}, {s.label()}"
        verdicts[name] = verdict
        rows.append(
            plain(
                [
                    title(ctx, s.pairing),
                    s.label(),
                    student_text,
                    teacher_text,
                    scores.text(decimals),
                    signed(lift, decimals),
                    share,
                    verdict.outcome,
                ]
            )
        )
        missing += unusable_lines(s.runs, scores.usable)
    missing += unusable_lines(table6_runs, set(final_scores(table6_runs, suites).values))
    header = ["pairing", "method", "student pre-OPD", "teacher", "trained student", "lift", "lift / gap", "verdict"]
    table6_quote = ", ".join(f"{r.model} {r.mode} {r.macro:.3f}" for r in ctx.settings.paper_reference.table6)
    evidence = ["Macro Avg@K (%); pre-OPD rows from grid table6, trained rows from grid table1.", ""]
    evidence += pipe_table(header, rows) + [""] + verdict_bullets(verdicts)
    return Section(
        key="0",
        title="Does distillation work in this profile?",
        paper="Not a claim of the paper but its premise: on-policy distillation lifts the student toward its "
        f"teacher. The paper's pre-OPD Macro (Table 6): {table6_quote}.",
        rule=RULES["distillation"],
        evidence=evidence + run_list(ctx, settings),
        verdict=combine(verdicts),
        runs=table6_runs + [run for s in settings for run in s.runs],
        missing=missing,
    )


def by_seed(scores: Scores, runs: list[GridRun]) -> dict[int, float]:
    """A setting's usable final macros keyed by seed (the pairing of the paired comparison)."""
    seeds = {run.run_id: int(run.field("seed", 0)) for run in runs}
    return {seeds[run_id]: value for run_id, value in scores.values.items()}


def pairing_comparisons(
    ctx: ReportContext, settings: list[Setting], suites: list[str]
) -> tuple[list[list[str]], dict[str, Verdict], list[str]]:
    """Per pairing: the table row (GR-OPD vs vanilla OPD), its verdict, and the unusable-run lines."""
    decimals = ctx.settings.table1.decimals
    rows, verdicts, missing = [], {}, []
    for pairing in dict.fromkeys(s.pairing for s in settings):
        by_method = {s.params.method: s for s in settings if s.pairing == pairing}
        gropd, opd = by_method.get("gropd"), by_method.get("opd")
        if gropd is None or opd is None:
            continue
        a, b = final_scores(gropd.runs, suites), final_scores(opd.runs, suites)
        seeds_a, seeds_b = by_seed(a, gropd.runs), by_seed(b, opd.runs)
        verdict = beats(seeds_a, len(a.collapsed), seeds_b, len(b.collapsed), ("GR-OPD", "vanilla OPD"))
        verdict = name_missing(verdict, {"table1": lacking(ctx, [gropd, opd], a.usable | b.usable)})
        paired = paired_difference(seeds_a, seeds_b)
        verdicts[title(ctx, pairing)] = verdict
        rows.append(
            [
                title(ctx, pairing),
                f"{gropd.label()}: {a.text(decimals)}",
                b.text(decimals),
                "—" if paired.n == 0 else f"{paired.mean:+.{decimals}f} ± {paired.spread:.{decimals}f} (n={paired.n})",
                "—"
                if paired.n < 2
                else f"[{paired.mean - paired.half_width:+.{decimals}f}, "
                f"{paired.mean + paired.half_width:+.{decimals}f}]",
                "—" if paired.n == 0 or a.collapsed or b.collapsed else comparison(paired, ("GR-OPD", "OPD")),
                verdict.outcome,
            ]
        )
        missing += unusable_lines(gropd.runs + opd.runs, a.usable | b.usable)
    return rows, verdicts, missing


COMPARISON_HEADER = [
    "pairing",
    "GR-OPD",
    "vanilla OPD",
    "paired difference (mean ± std)",
    f"{PAIRED_CONFIDENCE:.0%} interval",
    "comparison",
    "verdict",
]


def beats_section(ctx: ReportContext) -> Section:
    """Section 1: GR-OPD above vanilla OPD in macro Avg@K, per pairing and over all pairings."""
    suites = list(ctx.section("suites"))
    settings = settings_of(grid_runs(ctx, "table1"), "table1", ctx.train_defaults())
    rows, verdicts, missing = pairing_comparisons(ctx, settings, suites)
    evidence = ["Macro Avg@K (%) from grid table1; paired difference = GR-OPD − OPD of the same seed.", ""]
    evidence += pipe_table(COMPARISON_HEADER, [plain(row) for row in rows])
    evidence += [""] + verdict_bullets(verdicts)
    return Section(
        key="1",
        title="GR-OPD beats vanilla OPD in every pairing",
        paper="The paper: GR-OPD achieves a higher macro Avg@K than vanilla OPD in every teacher → student pairing.",
        rule=RULES["beats"],
        evidence=evidence + run_list(ctx, settings),
        verdict=combine(verdicts),
        runs=[run for s in settings for run in s.runs],
        missing=missing,
    )


def gains_section(ctx: ReportContext) -> Section:
    """Section 2: the matched non-thinking pairings' gains; the verdict is on their direction beyond noise."""
    suites = list(ctx.section("suites"))
    pairings = ctx.manifest("pairings")
    settings = [
        s
        for s in settings_of(grid_runs(ctx, "table1"), "table1", ctx.train_defaults())
        if matched(ctx, s.pairing) and pairings[s.pairing]["student"]["mode"] == "nothink"
    ]
    rows, verdicts, missing = pairing_comparisons(ctx, settings, suites)
    gains = " and ".join(f"+{g:g}" for g in ctx.settings.paper_reference.matched_gains) or "(not recorded)"
    names = " and ".join(dict.fromkeys(title(ctx, s.pairing) for s in settings))
    scale = (
        "Magnitudes are not comparable across profiles (other models, suites and scale): only the direction of "
        "our gap, beyond noise, is judged; its size is reported."
        if ctx.profile != "paper"
        else f"Compare our differences with the paper's {gains}; the verdict judges the direction beyond noise."
    )
    evidence = [scale, ""] + pipe_table(COMPARISON_HEADER, [plain(row) for row in rows])
    evidence += [""] + verdict_bullets(verdicts)
    return Section(
        key="2",
        title="The matched non-thinking pairings gain about 11 macro points",
        paper=f"The paper: GR-OPD gains {gains} macro points over vanilla OPD in the two matched non-thinking "
        f"pairings ({names}; which gain belongs to which is not in our notes).",
        rule=RULES["beats"],
        evidence=evidence + run_list(ctx, settings),
        verdict=combine(verdicts),
        runs=[run for s in settings for run in s.runs],
        missing=missing,
    )

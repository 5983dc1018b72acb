"""Figure 3: training dynamics. (a) the λ sweep at γ = .99 (grid `lambda`), (b) γ = .99 solid vs
γ = 1 dashed (grid `gamma`); one panel per pairing. Vanilla OPD purple, GR-OPD coloured by λ;
faint per-step lines, bold trailing moving averages, a dot at each run's last step (a collapsed
run ends early). The y metric is `fig3.metric` of experiments/report.yaml.
"""

from __future__ import annotations

from pathlib import Path

from matplotlib.figure import Figure

from gropd.report.context import ReportContext
from gropd.report.labels import pairing_title, run_label, run_params
from gropd.report.loading import GridRun, grid_runs, group_runs, missing_line, series
from gropd.report.plotting import (
    FigureSet,
    draw_dynamics,
    lambda_positions,
    new_figure,
    run_look,
)
from gropd.report.provenance import publish_figures


def dynamics_figure(ctx: ReportContext, runs: list[GridRun], title: str) -> tuple[Figure, list[str]]:
    """One panel per pairing, three lines per drawn run; returns the figure and the missing/partial runs."""
    metric, window = ctx.settings.fig3.metric, ctx.settings.fig3.window
    defaults, pairings = ctx.train_defaults(), ctx.manifest("pairings")
    groups = group_runs(runs, "pairing") or {("",): []}
    positions = lambda_positions([run_params(run, defaults) for run in runs])
    fig = new_figure(max(4.6 * len(groups), 6.0), 3.8)
    axes = fig.subplots(1, len(groups), squeeze=False)[0]
    missing = []
    for ax, ((pairing,), members) in zip(axes, groups.items(), strict=True):
        for run in members:
            steps, values = series(run.metrics(), metric)
            if not values:
                reason = run.describe() if run.state in ("not run", "running") else f"no {metric} in metrics.jsonl"
                missing.append(missing_line(run, reason))
                continue
            if run.state == "running":
                missing.append(missing_line(run, f"{run.describe()} (partial line)"))
            look = run_look(run_params(run, defaults), positions, ctx.settings.style)
            draw_dynamics(ax, steps, values, look, run_label(run, defaults), window)
        ax.set_title(pairing_title(pairings, pairing) if pairing else "no runs in this grid")
        ax.set_xlabel("rollout batch (step)")
        ax.set_ylabel(metric)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
        else:
            ax.text(0.5, 0.5, "no run has results yet", ha="center", va="center", transform=ax.transAxes)
    fig.suptitle(title, fontsize=10)
    return fig, missing


def build_figure3(ctx: ReportContext) -> FigureSet:
    """fig3a from grid `lambda`, fig3b from grid `gamma`."""
    window, metric = ctx.settings.fig3.window, ctx.settings.fig3.metric
    lam_runs, gamma_runs = grid_runs(ctx, "lambda"), grid_runs(ctx, "gamma")
    gamma = (ctx.train_defaults().get("gropd") or {}).get("gamma")
    fig_a, missing_a = dynamics_figure(
        ctx,
        lam_runs,
        f"Figure 3(a): {metric}, λ sweep at γ = {gamma} (grid lambda)\nbold: {window}-step moving average",
    )
    fig_b, missing_b = dynamics_figure(
        ctx,
        gamma_runs,
        f"Figure 3(b): {metric}, γ = .99 solid vs γ = 1 dashed (grid gamma)\nbold: {window}-step moving average",
    )
    return FigureSet(
        figures={"fig3a": fig_a, "fig3b": fig_b}, runs=lam_runs + gamma_runs, missing=missing_a + missing_b
    )


def fig3(ctx: ReportContext) -> list[Path]:
    """Write fig3a/fig3b as PNG and PDF, fig3.md and the provenance sidecar."""
    figures, s = build_figure3(ctx), ctx.settings
    caption = (
        f"y: `{s.fig3.metric}` per rollout batch; faint: per step; bold: trailing {s.fig3.window}-step "
        f"moving average; dot: the run's last step. Vanilla OPD {s.style.opd_colour}; GR-OPD coloured by λ "
        f"({s.style.lambda_cmap}); γ = 1 dashed. Profile {ctx.profile}."
    )
    manifests = ["grids/lambda.yaml", "grids/gamma.yaml", "report.yaml"]
    return publish_figures(ctx, "fig3", "Figure 3: training dynamics", caption, figures, manifests)

"""Figure 4: γ = 1 (dashed) vs γ = .99 (solid) on one pairing (`fig4.pairing`, grid `gamma`):
(A) mean response length, log y; (B) mean verifier reward; (C) Pearson(S, length);
(D) Spearman(S, reward). Every line is a centred `fig4.window`-step moving average of the
metric's non-null values (a correlation is null when it is undefined, e.g. all lengths equal).
"""

from __future__ import annotations

from pathlib import Path

from gropd.report.context import ReportContext
from gropd.report.labels import pairing_title, run_label, run_params
from gropd.report.loading import curve_rows, grid_runs, missing_line, series
from gropd.report.plotting import FigureSet, centred_mean, lambda_positions, new_figure, run_look
from gropd.report.provenance import publish_figures

PANELS = (
    ("A", "mean_response_len", "mean response length (tokens)", "log"),
    ("B", "verifier_reward", "mean verifier reward", "linear"),
    ("C", "pearson_score_len", "Pearson(S, length)", "linear"),
    ("D", "spearman_score_reward", "Spearman(S, reward)", "linear"),
)


def build_figure4(ctx: ReportContext) -> FigureSet:
    """The 2 x 2 figure from the `gamma` grid's runs on fig4.pairing; one line per run and panel."""
    pairing, window = ctx.settings.fig4.pairing, ctx.settings.fig4.window
    defaults = ctx.train_defaults()
    runs = [run for run in grid_runs(ctx, "gamma") if run.field("pairing") == pairing]
    positions = lambda_positions([run_params(run, defaults) for run in runs])
    fig = new_figure(9.5, 7.0)
    axes = fig.subplots(2, 2).ravel()
    missing = [] if runs else [f"grid gamma has no run on pairing {pairing}"]
    for run in runs:
        rows, notes = curve_rows(run)
        missing += notes
        if not rows:
            continue
        colour, linestyle = run_look(run_params(run, defaults), positions, ctx.settings.style)
        for ax, (_, key, _, _) in zip(axes, PANELS, strict=True):
            steps, values = series(rows, key)
            if not values:
                missing.append(missing_line(run, f"no {key} values in metrics.jsonl"))
                continue
            ax.plot(
                steps,
                centred_mean(values, window),
                color=colour,
                linestyle=linestyle,
                linewidth=2.0,
                label=run_label(run, defaults),
            )
    for ax, (letter, _, name, scale) in zip(axes, PANELS, strict=True):
        ax.set_yscale(scale)
        ax.set_title(f"({letter}) {name}", fontsize=9)
        ax.set_xlabel("rollout batch (step)")
    if axes[0].get_legend_handles_labels()[0]:
        axes[0].legend(fontsize=7)
    title = pairing_title(ctx.manifest("pairings"), pairing)
    fig.suptitle(
        f"Figure 4: γ = 1 (dashed) vs γ = .99 (solid) on {title}; centred {window}-step moving averages", fontsize=10
    )
    return FigureSet(figures={"fig4": fig}, runs=runs, missing=missing)


def fig4(ctx: ReportContext) -> list[Path]:
    """Write fig4.png, fig4.pdf, fig4.md and the provenance sidecar."""
    figures, s = build_figure4(ctx), ctx.settings
    caption = (
        f"Pairing {s.fig4.pairing}, grid gamma, profile {ctx.profile}. Lines: centred {s.fig4.window}-step "
        f"moving averages of each metric's non-null values; GR-OPD coloured by λ ({s.style.lambda_cmap}); "
        "panel A on a log axis."
    )
    manifests = ["grids/gamma.yaml", "report.yaml"]
    return publish_figures(ctx, "fig4", "Figure 4: γ = 1 vs γ = .99", caption, figures, manifests)

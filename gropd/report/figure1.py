"""Figure 1(b–d) from grid `fig1`: how far prefix credit sees, and what the raw trajectory score does.

(b) J_H(H) per pairing (`gropd.horizon`; the formula is ours, the paper gives none) from each
    scoring pass's horizon.json (J_H at every horizon, computed by the pass from its batches), at
    `fig1.horizon_points` horizons from 1 to the pass's longest response, on a cube-root H
    axis, a dot at each curve's peak and a dotted line at chance (0.5).
(c) mean response length per rollout batch of the grid's train runs (raw score vs GR-OPD),
    with each run's generation cap (`sampling.max_new_tokens`) as a dotted grey line.
(d) verifier reward per rollout batch of the same runs.
(c, d) draw as Figure 3: faint per step, bold trailing `fig1.window`-step moving average, a dot
at the last step. (a) is an illustration in the paper, not data, and is not drawn.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib import colormaps
from matplotlib.axes import Axes

from gropd.config.errors import RunFileError
from gropd.horizon import horizon_grid
from gropd.record.run_dir import RunDir
from gropd.report.context import ReportContext
from gropd.report.labels import pairing_title, run_label, run_params
from gropd.report.loading import GridRun, curve_rows, grid_runs, missing_line, series
from gropd.report.plotting import (
    FigureSet,
    draw_dynamics,
    lambda_positions,
    new_figure,
    run_look,
)
from gropd.report.provenance import publish_figures

H_TICKS = (1, 5, 10, 25, 50, 100, 250, 500, 1000, 2000, 4000, 8000, 16000, 32000, 64000)


@dataclass(frozen=True)
class Separation:
    """J_H of one scoring pass: horizons (tokens), J_H values, informative prompts, all prompts, mean reward."""

    horizons: list[int]
    values: list[float]
    informative: int
    prompts: int
    reward: float

    @property
    def peak(self) -> tuple[int, float]:
        """(H, J_H) at the largest J_H (the smallest such H)."""
        best = int(np.argmax(self.values))
        return self.horizons[best], self.values[best]


def separation(curve: dict[str, Any], points: int) -> Separation | str:
    """J_H at `points` horizons of a pass's horizon.json (horizon_grid over its longest response), or why
    it is undefined."""
    if not curve["horizons"]:
        return "every saved response is empty"
    if curve["values"] is None:
        return (
            f"no prompt has both correct and incorrect responses ({curve['prompts']} prompts, "
            f"mean reward {curve['reward']:.3f})"
        )
    at = dict(zip(curve["horizons"], curve["values"], strict=True))
    horizons = horizon_grid(curve["horizons"][-1], points)
    return Separation(horizons, [at[h] for h in horizons], curve["informative"], curve["prompts"], curve["reward"])


def draw_separation(ax: Axes, ctx: ReportContext, runs: list[GridRun]) -> tuple[list[str], list[str]]:
    """Panel (b): one J_H curve per scoring pass; returns (missing lines, peak lines)."""
    pairings, missing, peaks, right = ctx.manifest("pairings"), [], [], H_TICKS[1]
    colours = colormaps["tab10"]
    for index, run in enumerate(runs):
        if run.state != "finished":
            missing.append(missing_line(run, run.describe()))
            continue
        try:
            curve = RunDir(run.path).read_horizon()
        except RunFileError as err:
            curve, result = None, f"unreadable horizon.json ({err.problem})"
        else:
            result = "no horizon.json (a scoring pass writes it)" if curve is None else None
        result = result or separation(curve, ctx.settings.fig1.horizon_points)
        if isinstance(result, str):
            missing.append(missing_line(run, result))
            continue
        title = pairing_title(pairings, str(run.field("pairing")))
        colour = colours(index % 10)
        ax.plot(result.horizons, result.values, color=colour, linewidth=2.0, label=f"{title} ({result.informative})")
        right = max(right, result.horizons[-1])
        h, value = result.peak
        ax.plot([h], [value], color=colour, marker="o", linestyle="None", markersize=5)
        peaks.append(
            f"{title}: peak J_H = {value:.3f} at H = {h} tokens ({result.informative} of {result.prompts} "
            f"prompts informative; mean reward {result.reward:.3f})"
        )
    ax.axhline(0.5, color="grey", linestyle=":", linewidth=1.0)
    ax.set_xscale("function", functions=(np.cbrt, lambda x: np.power(x, 3)))
    ax.set_xlim(1, right)
    ax.set_xticks([tick for tick in H_TICKS if tick <= right])
    ax.set_xlabel("horizon H (tokens, cube-root axis)")
    ax.set_ylabel("J_H(H): within-prompt AUC (ours)")
    ax.set_title("(b) J_H(H) on fixed responses", fontsize=9)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7, title="pairing (informative prompts)", title_fontsize=7)
    else:
        ax.text(0.5, 0.5, "no scoring pass has results yet", ha="center", va="center", transform=ax.transAxes)
    return missing, peaks


def generation_cap(run: GridRun, defaults: dict[str, Any]) -> int | None:
    """sampling.max_new_tokens of the run's resolved config.yaml, else of the profile's defaults."""
    config = run.config() or defaults
    return (config.get("sampling") or {}).get("max_new_tokens")


def draw_training(axes: list[Axes], ctx: ReportContext, runs: list[GridRun]) -> list[str]:
    """Panels (c) length and (d) reward of the train runs; returns the missing/partial lines."""
    defaults, window, missing, caps = ctx.train_defaults(), ctx.settings.fig1.window, [], set()
    positions = lambda_positions([run_params(run, defaults) for run in runs])
    for run in runs:
        rows, notes = curve_rows(run)
        missing += notes
        if not rows:
            continue
        look = run_look(run_params(run, defaults), positions, ctx.settings.style)
        for ax, key in zip(axes, ("mean_response_len", "verifier_reward"), strict=True):
            steps, values = series(rows, key)
            if values:
                draw_dynamics(ax, steps, values, look, run_label(run, defaults), window)
            else:
                missing.append(missing_line(run, f"no {key} values in metrics.jsonl"))
        caps.add(generation_cap(run, defaults))
    for cap in sorted(c for c in caps if c is not None):
        axes[0].axhline(cap, color="grey", linestyle=":", linewidth=1.2, label=f"generation cap ({cap} tokens)")
    titles = {pairing_title(ctx.manifest("pairings"), str(run.field("pairing"))) for run in runs}
    where = ", ".join(sorted(titles)) or "no train runs in grid fig1"
    for ax, name in zip(axes, ("(c) mean response length (tokens)", "(d) mean verifier reward"), strict=True):
        ax.set_title(f"{name}, {where}", fontsize=9)
        ax.set_xlabel("rollout batch (step)")
    if axes[0].get_legend_handles_labels()[0]:
        axes[0].legend(fontsize=7)
    for ax in axes:
        if not ax.get_lines():
            ax.text(0.5, 0.5, "no train run has results yet", ha="center", va="center", transform=ax.transAxes)
    return missing


def build_figure1(ctx: ReportContext) -> tuple[FigureSet, list[str]]:
    """The three panels from grid fig1's runs; returns the figure set and the peak lines of (b)."""
    runs = grid_runs(ctx, "fig1")
    scoring = [run for run in runs if run.field("kind") == "score"]
    training = [run for run in runs if run.field("kind") == "train"]
    fig = new_figure(14.0, 4.2)
    axes = list(fig.subplots(1, 3))
    missing, peaks = draw_separation(axes[0], ctx, scoring)
    missing += draw_training(axes[1:], ctx, training)
    fig.suptitle(
        "Figure 1(b–d): J_H(H) on fixed responses (formula ours); raw trajectory score vs GR-OPD in training",
        fontsize=10,
    )
    return FigureSet(figures={"figure1": fig}, runs=runs, missing=missing), peaks


def fig1(ctx: ReportContext) -> list[Path]:
    """Write figure1.png, figure1.pdf, figure1.md (caption, peaks) and the provenance sidecar."""
    figures, peaks = build_figure1(ctx)
    window = ctx.settings.fig1.window
    caption = (
        "(b) J_H(H) is ours (the paper gives no formula): for each prompt with both correct and incorrect "
        "responses, the AUC between the prefix scores S_i(H) = Σ_{t ≤ min(H, |y_i|)} f_{i,t} of its correct "
        "and incorrect responses (the chance that a correct response outscores an incorrect one; ties half), "
        "averaged over those prompts; 0.5 (dotted) is chance, higher is better; H on a cube-root axis, a dot at "
        "each peak. Responses: the untrained student of each pairing in its own mode (grid fig1, kind score), "
        "scored under its teacher and graded by the verifier. (c, d) the raw trajectory score as every token's "
        "advantage (A_{i,t} = S_i: no group mean, no σ) vs GR-OPD; faint per step, bold trailing "
        f"{window}-step moving average; dotted grey: the generation cap. (a) is an illustration in the paper "
        f"and is not drawn. Profile {ctx.profile}."
    )
    if peaks:
        caption += "\n\n" + "\n".join(f"- {line}" for line in peaks)
    title, manifests = (
        "Figure 1: horizon of prefix credit; raw score",
        ["grids/fig1.yaml", "pairings.yaml", "report.yaml"],
    )
    return publish_figures(ctx, "figure1", title, caption, figures, manifests)

"""Figures 1(b–d), 3 and 4 from the evidence layer's runs, each saying which seeds it draws.

Vanilla OPD in `style.opd_colour`, the raw score in `style.raw_colour` and `style.raw_linestyle` (drawn over
GR-OPD), GR-OPD by λ on `style.lambda_cmap` (the figure's λ evenly from 35 % of the map to 100 %), γ = 1 in
`style.gamma_one_linestyle`. Bare matplotlib Figures on the Agg canvas; PDFs and SVGs carry no date (same results,
same bytes). The SVG text goes to the index page (the artefact's Drawing), not to a file of its own.
"""

from __future__ import annotations

import io
import statistics
from dataclasses import dataclass
from typing import Any

import numpy as np
from matplotlib import colormaps, rc_context
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import LogFormatter

from gropd.report.evidence import Evidence, Run, missing, series
from gropd.report.formats import missing_block
from gropd.report.publish import Artefact
from gropd.report.stats import stats

METRIC_NAMES = {"verifier_reward": "mean verifier reward (fraction correct)", "pearson_score_len": "Pearson(S, length)"}
METRIC_NAMES |= {"mean_response_len": "mean response length (tokens)", "spearman_score_reward": "Spearman(S, reward)"}
DRAWS = {"fig3a": ("lambda",), "fig3b": ("gamma",), "fig4": ("gamma",), "figure1": ("fig1",)}  # each figure's grids
SVG_SETTINGS = {"svg.hashsalt": "gropd-report", "svg.fonttype": "none"}  # fixed ids; text kept as text (searchable)
H_TICKS = (1, 5, 10, 25, 50, 100, 250, 500, 1000, 2000, 4000, 8000, 16000, 32000, 64000)
SEED_STYLES = ("-", "--", ":", "-.")  # figure 1(b): a pairing's seeds, in order, in its one colour


def metric_name(key: str) -> str:
    return METRIC_NAMES.get(key, key.replace("_", " "))


def seeds_text(runs: list[Run], long: bool = False) -> str:
    """'seed 0' or 'seeds 0, 1, 2'; `long` adds what one seed per setting means."""
    seeds = sorted({run.seed for run in runs})
    text = (f"seed{'s' if len(seeds) > 1 else ''} " + ", ".join(map(str, seeds))) if seeds else "no runs"
    one = " (one run per setting: no difference between lines is resolved)"
    return text + (one if long and len(seeds) == 1 else "")


def new_figure(width: float, height: float) -> Figure:
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def moving_mean(values: list[float], window: int, centred: bool) -> list[float]:
    """m_i = mean(v_{i-w+1} .. v_i) trailing, or mean(v_{i-(w-1)//2} .. v_{i+w//2}) centred; cut at the ends."""
    before, after = ((window - 1) // 2, window // 2) if centred else (window - 1, 0)
    return [statistics.fmean(values[max(0, i - before) : i + after + 1]) for i in range(len(values))]


class Looks:
    """Colour, line style, drawing order and legend label of each run of one figure: a setting's seeds share its
    colour and style, and its legend entry, once a panel (the title names the seeds drawn)."""

    def __init__(self, ev: Evidence, runs: list[Run]):
        self.ev, self.labelled = ev, set()
        lams = sorted({lam for run in runs if (lam := ev.setting_of(run).knob("lam")) is not None})
        self.positions = {lam: 1 - 0.65 * (len(lams) - 1 - i) / max(1, len(lams) - 1) for i, lam in enumerate(lams)}

    def __call__(self, run: Run) -> dict[str, Any]:
        setting, style = self.ev.setting_of(run), self.ev.report.style
        gamma, lam = setting.knob("gamma"), setting.knob("lam")
        look = {"linestyle": style.gamma_one_linestyle if gamma is not None and gamma >= 1.0 else "-", "zorder": 2}
        if setting.record and setting.record.role == "ablation":  # the raw score, drawn over GR-OPD
            return look | {"color": style.raw_colour, "linestyle": style.raw_linestyle, "zorder": 3}
        return look | {"color": style.opd_colour if lam is None else colormaps[style.lambda_cmap](self.positions[lam])}

    def label(self, run: Run, ax: Axes) -> str:
        """The setting's label for its first run drawn on `ax`; for its other seeds '_…', which no legend shows."""
        label = self.ev.setting_of(run).label
        first = (id(ax), label) not in self.labelled
        self.labelled.add((id(ax), label))
        return label if first else f"_{label}"


def draw(ax: Axes, run: Run, key: str, looks: Looks, window: int, notes: list[str], centred: bool = False) -> None:
    """One run's metric: faint per step, the bold moving average (labelled), a dot at the last step (trailing
    average only); a run without it, or still running (a partial line), gets a line in `notes`."""
    steps, values = series(run.metrics, key)
    note = missing(run, run.dynamics_reason() or f"no {key} in metrics.jsonl") if not values else None
    note = missing(run, f"{run.describe()} (partial line)") if values and run.state == "running" else note
    notes += [note] if note and note not in notes else []
    if values:
        look, smooth = looks(run), moving_mean(values, window, centred)
        if not centred:
            ax.plot(steps, values, linewidth=0.8, alpha=0.3, **look)
            ax.plot([steps[-1]], [smooth[-1]], color=look["color"], marker="o", markersize=5, zorder=look["zorder"])
        width = 2.0 if centred else 2.2 if look["zorder"] == 2 else 1.4
        ax.plot(steps, smooth, linewidth=width, label=looks.label(run, ax), **look)


def finish(ax: Axes, title: str, ylabel: str, legend: bool = True, empty: str = "no run has results yet") -> None:
    ax.set_title(title, fontsize=9)
    ax.set_xlabel("rollout batch (training step)")
    ax.set_ylabel(ylabel)
    if legend and ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)
    elif not ax.get_lines():
        ax.text(0.5, 0.5, empty, ha="center", va="center", transform=ax.transAxes)


@dataclass(frozen=True)
class Drawing:
    """What a figure artefact shows, for the index page: its title, caption and points as <name>.md has them,
    and each figure (stem -> an SVG document; DRAWS[stem]: the grids it draws)."""

    title: str
    caption: str
    points: list[str]
    svgs: dict[str, str]


def svg(fig: Figure) -> str:
    """The figure as an SVG document: the same figure gives the same text (SVG_SETTINGS, no metadata)."""
    buffer = io.BytesIO()
    with rc_context(SVG_SETTINGS):
        fig.savefig(buffer, format="svg", metadata=dict.fromkeys(("Date", "Format", "Type", "Creator")))
    return buffer.getvalue().decode()


def figure_artefact(ev: Evidence, name: str, text: tuple[str, str, list[str]], figures: dict, runs: list, notes: list):
    """PNG and PDF of each figure, and <name>.md: the title, the caption (with the seeds drawn and the results
    directory), its bullet points, the images and the Missing list (`notes`); the same as a Drawing, with SVGs."""
    (title, caption, points), files = text, {}
    for stem, fig in figures.items():
        for fmt, metadata in (("png", None), ("pdf", {"CreationDate": None})):
            buffer = io.BytesIO()
            fig.savefig(buffer, format=fmt, dpi=150, metadata=metadata)
            files[f"{stem}.{fmt}"] = buffer.getvalue()
    caption += f" Drawn: {seeds_text(runs, long=True)}. Built from `{ev.profile_results}/` ({ev.profile} profile)."
    drawing = Drawing(title, caption, points, {stem: svg(fig) for stem, fig in figures.items()})
    lines = [f"### {title}", "", caption, ""] + [f"- {point}" for point in points] + ([""] if points else [])
    lines += [f"![{stem}]({stem}.png)" for stem in figures] + [""] + missing_block(notes)
    files[f"{name}.md"], grids = "\n".join(lines) + "\n", tuple(dict.fromkeys(g for s in figures for g in DRAWS[s]))
    manifests = [f"grids/{g}.yaml" for g in grids] + ["pairings.yaml", "report.yaml"]
    return Artefact(name, files, runs, notes, manifests, grids, content=drawing)


def dynamics_figure(ev: Evidence, grid: str, title: str, notes: list[str]) -> tuple[Figure, list[Run]]:
    """One panel per pairing of `grid`'s train runs: `fig3.metric` against the step."""
    metric, window = ev.report.fig3.metric, ev.report.fig3.window
    runs = [run for run in ev.runs(grid) if run.config.get("kind") == "train"]
    pairings = list(dict.fromkeys(str(run.config.get("pairing")) for run in runs)) or [""]
    fig, looks = new_figure(max(4.6 * len(pairings), 6.0), 3.8), Looks(ev, runs)
    for ax, pairing in zip(fig.subplots(1, len(pairings), squeeze=False)[0], pairings, strict=True):
        for run in (r for r in runs if r.config.get("pairing") == pairing):
            draw(ax, run, metric, looks, window, notes)
        finish(ax, ev.title(pairing) if pairing else f"no runs in grid {grid}", metric_name(metric))
    fig.suptitle(f"{title}; {seeds_text(runs)}\nbold: trailing {window}-step moving average", fontsize=10)
    return fig, runs


def fig3(ev: Evidence) -> Artefact:
    """(a) the λ sweep (grid lambda), (b) γ = .99 solid vs γ = 1 dashed (grid gamma)."""
    s, metric, notes = ev.report, metric_name(ev.report.fig3.metric), []
    fig_a, runs_a = dynamics_figure(ev, "lambda", f"Figure 3(a): {metric}, λ sweep (grid lambda)", notes)
    fig_b, runs_b = dynamics_figure(ev, "gamma", f"Figure 3(b): {metric}, γ = 1 dashed (grid gamma)", notes)
    caption = (
        f"y: {metric} (`{s.fig3.metric}`) per rollout batch; faint: per step; bold: trailing {s.fig3.window}-step "
        f"moving average; dot: the run's last step (a collapsed run ends early). Vanilla OPD {s.style.opd_colour}; "
        f"GR-OPD coloured by λ ({s.style.lambda_cmap}); γ = 1 dashed."
    )
    text = ("Figure 3: training dynamics", caption, [])
    return figure_artefact(ev, "fig3", text, {"fig3a": fig_a, "fig3b": fig_b}, runs_a + runs_b, notes)


PANELS = {"A": "mean_response_len", "B": "verifier_reward", "C": "pearson_score_len", "D": "spearman_score_reward"}


def fig4(ev: Evidence) -> Artefact:
    """γ = 1 (dashed) vs γ = .99 (solid) on `fig4.pairing` (grid gamma): four panels of centred moving averages."""
    pairing, window = ev.report.fig4.pairing, ev.report.fig4.window
    runs = [run for run in ev.runs("gamma") if run.config.get("pairing") == pairing]
    fig, looks, notes = new_figure(9.5, 7.0), Looks(ev, runs), [] if runs else [f"grid gamma has no run on {pairing}"]
    for ax, (letter, key) in zip(fig.subplots(2, 2).ravel(), PANELS.items(), strict=True):
        for run in runs:
            draw(ax, run, key, looks, window, notes, centred=True)
        if letter == "A":  # log axis, plain numbers on the ticks ("50", not "5×10¹") however narrow the range
            ax.set_yscale("log")
            ax.yaxis.set_major_formatter(LogFormatter(labelOnlyBase=False))
            ax.yaxis.set_minor_formatter(LogFormatter(labelOnlyBase=False, minor_thresholds=(2, 0.5)))
        finish(ax, f"({letter}) {metric_name(key)}", metric_name(key), legend=letter == "A")
    title = f"Figure 4: γ = 1 (dashed) vs γ = .99 (solid) on {ev.title(pairing)}; {seeds_text(runs)}"
    fig.suptitle(f"{title}\ncentred {window}-step moving averages", fontsize=10)
    caption = (
        f"Pairing {ev.title(pairing)}, grid gamma. Lines: centred {window}-step moving averages of each metric's "
        "non-null values (a correlation is null when undefined); GR-OPD coloured by λ "
        f"({ev.report.style.lambda_cmap}); panel A on a log axis."
    )
    return figure_artefact(ev, "fig4", ("Figure 4: γ = 1 vs γ = .99", caption, []), {"fig4": fig}, runs, notes)


def fig1(ev: Evidence) -> Artefact:
    """(b) J_H(H) of each scoring pass of grid fig1, a colour per pairing and a line style per seed, and each
    pairing's peak as mean ± sample std over its seeds; (c, d) length and reward of its train runs."""
    runs = ev.runs("fig1")
    scoring, training = ([run for run in runs if run.config.get("kind") == kind] for kind in ("score", "train"))
    fig = new_figure(14.0, 4.2)
    (ax_b, ax_c, ax_d), notes, peaks, right = fig.subplots(1, 3), [], [], H_TICKS[1]
    pairings = list(dict.fromkeys(ev.title(str(run.config.get("pairing"))) for run in scoring))
    seeds, per_pairing = sorted({run.seed for run in scoring}), {title: [] for title in pairings}
    for run in scoring:
        if isinstance(curve := run.separation(ev.report.fig1.horizon_points), str):
            notes.append(missing(run, curve))
            continue
        title = ev.title(str(run.config.get("pairing")))
        colour, style = colormaps["tab10"](pairings.index(title) % 10), SEED_STYLES[seeds.index(run.seed) % 4]
        h, value = curve["peak"]
        label = title if not per_pairing[title] else f"_{title}"  # one legend entry a pairing (its first seed's line)
        ax_b.plot(curve["shown"], curve["at"], color=colour, linestyle=style, linewidth=2.0, label=label)
        ax_b.plot([h], [value], color=colour, marker="o", linestyle="None", markersize=5)
        right = max(right, curve["horizons"][-1])
        per_pairing[title].append((run.seed, value))
        peaks.append(
            f"{title}, seed {run.seed}: peak J_H = {value:.3f} at H = {h} tokens of {curve['horizons'][-1]} "
            f"({curve['informative']} of {curve['prompts']} prompts informative; mean reward {curve['reward']:.3f})"
        )
    peaks += [
        f"{title}: peak J_H {stats([v for _, v in found]).text(3)} over seeds {', '.join(str(s) for s, _ in found)} "
        "(mean ± sample std)"
        for title, found in per_pairing.items()
        if len(found) > 1
    ]
    ax_b.axhline(0.5, color="grey", linestyle=":", linewidth=1.0)
    ax_b.set_xscale("function", functions=(np.cbrt, lambda x: np.power(x, 3)))
    ax_b.set(xlim=(1, right), xticks=[tick for tick in H_TICKS if tick <= right])
    finish(ax_b, "(b) J_H(H) on fixed responses (formula ours)", "J_H(H): within-prompt AUC", empty="no pass yet")
    ax_b.set_xlabel("horizon H (tokens, cube-root axis)")
    if ax_b.get_legend():
        ax_b.get_legend().set_title("pairing (seeds: solid, dashed, dotted)", prop={"size": 7})
    looks, window = Looks(ev, training), ev.report.fig1.window
    for run in sorted(training, key=lambda r: looks(r)["zorder"]):
        for ax, key in ((ax_c, "mean_response_len"), (ax_d, "verifier_reward")):
            draw(ax, run, key, looks, window, notes)
    for cap in sorted({c for run in training if (c := (run.config.get("sampling") or {}).get("max_new_tokens"))}):
        ax_c.axhline(cap, color="grey", linestyle=":", linewidth=1.2, label=f"generation cap ({cap} tokens)")
    where = ", ".join(sorted({ev.title(str(run.config.get("pairing"))) for run in training})) or "no train runs"
    for ax, key, letter in ((ax_c, "mean_response_len", "c"), (ax_d, "verifier_reward", "d")):
        finish(ax, f"({letter}) {metric_name(key)}, {where}", metric_name(key), empty="no train run has results yet")
    title = f"Figure 1(b–d): J_H(H) on fixed responses; raw score vs GR-OPD in training; {seeds_text(runs)}"
    fig.suptitle(title, fontsize=10)
    caption = (
        "(b) J_H(H) is ours (the paper gives no formula): for each prompt with both correct and incorrect responses, "
        "the AUC between the prefix scores S_i(H) = Σ_{t ≤ min(H, |y_i|)} f_{i,t} of its correct and incorrect "
        "responses (ties half), averaged over those prompts; 0.5 (dotted) is chance; H on a cube-root axis; a dot at "
        "each curve's peak, found on the curve at every horizon; a colour per pairing, its seeds solid, dashed, "
        "dotted in order. Responses: the untrained student of each pairing in its own mode (grid fig1, kind score), "
        "scored under its teacher. (c, d) the raw trajectory score as every "
        f"token's advantage (A_i,t = S_i: no group mean, no σ; line `{ev.report.style.raw_linestyle}`, on top) vs "
        f"GR-OPD; faint per step, bold trailing {window}-step moving average; dotted grey: the generation cap. (a) is "
        "an illustration in the paper and is not drawn."
    )
    text = ("Figure 1: horizon of prefix credit; raw score", caption, peaks)
    return figure_artefact(ev, "figure1", text, {"figure1": fig}, runs, notes)

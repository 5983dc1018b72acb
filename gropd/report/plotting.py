"""Shared drawing for Figures 1, 3 and 4: run colours and line styles, one run's lines, saving.

Colours: vanilla OPD in `style.opd_colour` (purple); the raw score in `style.raw_colour`; GR-OPD by λ
on the sequential colormap `style.lambda_cmap`: the distinct λ of a figure, in increasing order, evenly
spaced from 35 % of the map (pale but visible) to 100 % (so close values such as .2 and .25 stay
distinguishable).
Line style: γ = 1 `style.gamma_one_linestyle` (dashed), any other γ solid.
Figures are bare `matplotlib.figure.Figure` objects on the Agg canvas (no pyplot, no global backend state).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path

from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from eval.files import atomic_write_text, atomic_write_with
from gropd.report.labels import RunParams
from gropd.report.loading import GridRun
from gropd.report.settings import StyleSettings


@dataclass(frozen=True)
class FigureSet:
    """The figures of one artefact by file stem, the runs drawn from, and missing/partial runs."""

    figures: dict[str, Figure]
    runs: list[GridRun]
    missing: list[str] = field(default_factory=list)


def new_figure(width: float, height: float) -> Figure:
    """A Figure with an Agg canvas attached."""
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def lambda_positions(params: list[RunParams]) -> dict[float, float]:
    """Colormap position of each distinct λ: evenly spaced over [0.35, 1] in increasing λ (one λ: 1)."""
    lams = sorted({p.lam for p in params if p.lam is not None})
    if len(lams) == 1:
        return {lams[0]: 1.0}
    return {lam: 0.35 + 0.65 * i / (len(lams) - 1) for i, lam in enumerate(lams)}


def run_look(params: RunParams, positions: dict[float, float], style: StyleSettings) -> tuple[str | tuple, str]:
    """(colour, linestyle) of a run; `positions` from lambda_positions over the figure's runs."""
    linestyle = style.gamma_one_linestyle if params.gamma is not None and params.gamma >= 1.0 else "-"
    if params.method == "raw":
        return style.raw_colour, linestyle
    if params.lam is None:
        return style.opd_colour, linestyle
    return colormaps[style.lambda_cmap](positions[params.lam]), linestyle


def draw_dynamics(ax: Axes, steps: list[float], values: list[float], look: tuple, label: str, window: int) -> None:
    """Three lines: faint per-step values, the bold trailing `window`-step moving average (labelled),
    and a dot at the run's last step (on the moving average)."""
    colour, linestyle = look
    smooth = trailing_mean(values, window)
    ax.plot(steps, values, color=colour, linestyle=linestyle, linewidth=0.8, alpha=0.3)
    ax.plot(steps, smooth, color=colour, linestyle=linestyle, linewidth=2.2, label=label)
    ax.plot([steps[-1]], [smooth[-1]], color=colour, linestyle="None", marker="o", markersize=5)


def save_figure(fig: Figure, out_dir: Path, stem: str) -> list[Path]:
    """Write <stem>.png and <stem>.pdf atomically (temp file, then rename); the PDF carries no creation
    date, so the same results give the same bytes."""
    paths = []
    for fmt, metadata in (("png", None), ("pdf", {"CreationDate": None})):
        path = out_dir / f"{stem}.{fmt}"
        atomic_write_with(path, lambda tmp, f=fmt, m=metadata: fig.savefig(tmp, format=f, dpi=150, metadata=m))
        paths.append(path)
    return paths


def write_figure_markdown(
    out_dir: Path, name: str, title: str, caption: str, stems: list[str], missing: list[str]
) -> Path:
    """<name>.md: the title, caption, the PNGs, and the missing/partial runs with reasons."""
    lines = [f"### {title}", "", caption, ""] + [f"![{stem}]({stem}.png)" for stem in stems]
    lines += ["", "**Missing:** none" if not missing else "**Missing:**"] + [f"- {item}" for item in missing]
    path = out_dir / f"{name}.md"
    atomic_write_text(path, "\n".join(lines) + "\n")
    return path


# --- moving averages of a metric series (values already stripped of nulls, in step order) ---------------


def trailing_mean(values: list[float], window: int) -> list[float]:
    """m_i = mean(v_{max(0, i-w+1)} .. v_i): the last `window` points, fewer at the start."""
    return [statistics.fmean(values[max(0, i - window + 1) : i + 1]) for i in range(len(values))]


def centred_mean(values: list[float], window: int) -> list[float]:
    """m_i = mean(v_{i-(w-1)//2} .. v_{i+w//2}), the window cut at both ends of the series."""
    before, after = (window - 1) // 2, window // 2
    return [statistics.fmean(values[max(0, i - before) : i + after + 1]) for i in range(len(values))]

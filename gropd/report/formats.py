"""A rendered table and its three forms: Markdown (legend and Missing list under it), LaTeX (booktabs), CSV.

A Cell carries its display text and, in a numeric column, its numbers in full precision: the CSV gives
each of them a column of its own (`<column> mean`, `<column> std`, `<column> n`, …), never a string.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field

from gropd.report.stats import Interval, Stats


@dataclass(frozen=True)
class Cell:
    text: str
    bold: bool = False
    numbers: tuple[float | int | None, ...] = ()

    @staticmethod
    def texts(*values: object) -> list[Cell]:
        return [Cell(str(value)) for value in values]

    @staticmethod
    def count(n: int) -> Cell:
        return Cell(str(n), numbers=(n,))


@dataclass(frozen=True)
class Column:
    """A header; `parts` names the CSV columns of a numeric column (empty: the text itself)."""

    title: str
    parts: tuple[str, ...] = ()

    @staticmethod
    def texts(*titles: str) -> list[Column]:
        return [Column(title) for title in titles]


STATS = ("mean", "std", "n")
INTERVAL = ("mean", "ci_low", "ci_high", "n")


def stats_cell(value: Stats | None, decimals: int, bold: bool = False, empty: str = "—") -> Cell:
    if value is None:
        return Cell(empty, numbers=(None, None, None))
    return Cell(value.text(decimals), bold, (value.mean, value.std, value.n))


def interval_cell(value: Interval | None, decimals: int, text: str = "") -> Cell:
    """'+1.23 [+0.45, +2.01] (n=5)' (or `text` when given); no common seed: '—'."""
    if value is None:
        return Cell(text or "—", numbers=(None,) * 4)
    return Cell(text or value.text(decimals), numbers=(value.mean, value.lo, value.hi, value.n))


@dataclass(frozen=True)
class Table:
    """A table ready to write; the first `label_columns` columns are labels (left-aligned in LaTeX)."""

    name: str
    title: str
    legend: list[str]
    columns: list[Column]
    rows: list[list[Cell]]
    missing: list[str] = field(default_factory=list)
    label_columns: int = 1


def missing_block(missing: list[str]) -> list[str]:
    """The Missing list every artefact ends with: the runs it could not use, each with the reason."""
    if not missing:
        return ["**Missing:** none"]
    return ["**Missing** (runs not in the numbers above):"] + [f"- {line}" for line in missing]


def pipe_table(header: list[str], rows: list[list[Cell]]) -> list[str]:
    """The lines of a Markdown pipe table (bold cells as **x**, pipes escaped)."""

    def cell(c: Cell) -> str:
        text = c.text.replace("|", "\\|")
        return f"**{text}**" if c.bold and text else text

    lines = ["| " + " | ".join(cell(c) for c in row) + " |" for row in [[Cell(h) for h in header], *rows]]
    return [lines[0], "|" + "|".join("---" for _ in header) + "|", *lines[1:]]


def to_markdown(table: Table) -> str:
    lines = [f"### {table.title}", "", "  \n".join(table.legend), ""]
    lines += pipe_table([c.title for c in table.columns], table.rows) + [""] + missing_block(table.missing)
    return "\n".join(lines) + "\n"


LATEX_SPECIAL = {"\\": r"\textbackslash{}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}"}
LATEX_SPECIAL |= {c: "\\" + c for c in "&%$#_{}"}
LATEX_UNICODE = {"→": r"$\to$", "λ": r"$\lambda$", "γ": r"$\gamma$", "±": r"$\pm$", "Δ": r"$\Delta$", "—": "---"}
LATEX_UNICODE |= {"–": "--", "−": "-", "μ": r"$\mu$", "σ": r"$\sigma$", "≥": r"$\geq$"}


def latex_escape(text: str) -> str:
    """Escape LaTeX specials, then spell the few non-ASCII symbols the tables use."""
    out = "".join(LATEX_SPECIAL.get(ch, ch) for ch in text)
    for symbol, latex in LATEX_UNICODE.items():
        out = out.replace(symbol, latex)
    return out


def to_latex(table: Table) -> str:
    """A booktabs `table` environment: label columns left-aligned, the rest right-aligned; legend and Missing below."""

    def cell(c: Cell) -> str:
        text = latex_escape(c.text)
        return rf"\textbf{{{text}}}" if c.bold and text else text

    align = "l" * table.label_columns + "r" * (len(table.columns) - table.label_columns)
    caption = latex_escape(f"{table.title}. {table.legend[0]}")
    lines = [r"\begin{table}[t]", r"\centering", rf"\caption{{{caption}}}"]
    lines += [rf"\label{{tab:{table.name}}}", rf"\begin{{tabular}}{{{align}}}", r"\toprule"]
    lines += [" & ".join(latex_escape(c.title) for c in table.columns) + r" \\", r"\midrule"]
    lines += [" & ".join(cell(c) for c in row) + r" \\" for row in table.rows] + [r"\bottomrule", r"\end{tabular}"]
    notes = table.legend[1:] + [f"Missing: {line}" for line in table.missing]
    lines += [rf"\par\footnotesize {latex_escape(note)}" for note in notes] + [r"\end{table}"]
    return "\n".join(lines) + "\n"


def to_csv(table: Table) -> str:
    """Header and rows; a numeric column becomes one CSV column per part, holding full-precision numbers."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow([f"{c.title} {p}" if c.parts else c.title for c in table.columns for p in (c.parts or ("",))])
    for row in table.rows:
        values: list[object] = []
        for column, cell in zip(table.columns, row, strict=True):
            values += ["" if v is None else repr(v) for v in cell.numbers] if column.parts else [cell.text]
        writer.writerow(values)
    return buffer.getvalue()


def render_table(table: Table) -> dict[str, str]:
    """{file name: text} of the table's .md, .tex and .csv."""
    writers = {".md": to_markdown, ".tex": to_latex, ".csv": to_csv}
    return {f"{table.name}{ext}": write(table) for ext, write in writers.items()}

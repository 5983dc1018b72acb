"""A rendered table and its three writers: Markdown (with notes under it), LaTeX (booktabs), CSV.

Cells carry display text (rounded) and, where it differs, `raw` full-precision text for the CSV.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from pathlib import Path

from eval.files import atomic_write_text


@dataclass(frozen=True)
class Cell:
    """One table cell: `text` as displayed, `bold` for the better entry, `raw` for the CSV (None: use text)."""

    text: str
    bold: bool = False
    raw: str | None = None


@dataclass(frozen=True)
class Table:
    """A table ready to write. `notes` are footnotes; `missing` lists unusable runs with the reason;
    the first `label_columns` columns are labels (left-aligned in LaTeX)."""

    name: str
    title: str
    caption: str
    header: list[str]
    rows: list[list[Cell]]
    notes: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    label_columns: int = 1


def plain(texts: list[str]) -> list[Cell]:
    """A row of plain cells."""
    return [Cell(text) for text in texts]


def pipe_table(header: list[str], rows: list[list[Cell]]) -> list[str]:
    """The lines of a Markdown pipe table (bold cells as **x**, pipes escaped)."""

    def cell(c: Cell) -> str:
        text = c.text.replace("|", "\\|")
        return f"**{text}**" if c.bold and text else text

    lines = ["| " + " | ".join(h.replace("|", "\\|") for h in header) + " |"]
    lines.append("|" + "|".join("---" for _ in header) + "|")
    return lines + ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]


def to_markdown(table: Table) -> str:
    """`### title`, the caption, a pipe table (bold as **x**), then footnotes and a 'Missing' list."""
    lines = [f"### {table.title}", "", table.caption, ""] + pipe_table(table.header, table.rows)
    if table.notes:
        lines += [""] + [f"{note}  " for note in table.notes]
    lines += ["", "**Missing:** none" if not table.missing else "**Missing:**"]
    lines += [f"- {item}" for item in table.missing]
    return "\n".join(lines) + "\n"


LATEX_SPECIAL = {
    "\\": r"\textbackslash{}",
    "&": r"\&",
    "%": r"\%",
    "$": r"\$",
    "#": r"\#",
    "_": r"\_",
    "{": r"\{",
    "}": r"\}",
    "~": r"\textasciitilde{}",
    "^": r"\textasciicircum{}",
}
LATEX_UNICODE = {
    "→": r"$\to$",
    "λ": r"$\lambda$",
    "γ": r"$\gamma$",
    "±": r"$\pm$",
    "‡": r"$^{\ddagger}$",
    "†": r"$^{\dagger}$",
    "—": "---",
    "–": "--",
    "≠": r"$\neq$",
    "μ": r"$\mu$",
    "σ": r"$\sigma$",
}


def latex_escape(text: str) -> str:
    """Escape LaTeX specials, then spell the few non-ASCII symbols the tables use."""
    out = "".join(LATEX_SPECIAL.get(ch, ch) for ch in text)
    for symbol, latex in LATEX_UNICODE.items():
        out = out.replace(symbol, latex)
    return out


def to_latex(table: Table) -> str:
    """A booktabs `table` environment: label columns left-aligned, the rest right-aligned; notes below."""

    def cell(c: Cell) -> str:
        text = latex_escape(c.text)
        return rf"\textbf{{{text}}}" if c.bold and text else text

    align = "l" * table.label_columns + "r" * (len(table.header) - table.label_columns)
    lines = [
        r"\begin{table}[t]",
        r"\centering",
        rf"\caption{{{latex_escape(table.title)}. "
        rf"{latex_escape(table.caption)}}}",
        rf"\label{{tab:{table.name}}}",
        rf"\begin{{tabular}}{{{align}}}",
        r"\toprule",
        " & ".join(latex_escape(h) for h in table.header) + r" \\",
        r"\midrule",
    ]
    lines += [" & ".join(cell(c) for c in row) + r" \\" for row in table.rows]
    lines += [r"\bottomrule", r"\end{tabular}"]
    for note in table.notes + [f"Missing: {item}" for item in table.missing]:
        lines.append(rf"\par\footnotesize {latex_escape(note)}")
    lines.append(r"\end{table}")
    return "\n".join(lines) + "\n"


def to_csv(table: Table) -> str:
    """Header and rows; each cell's full-precision `raw` text where it has one, else its display text."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(table.header)
    writer.writerows([[c.raw if c.raw is not None else c.text for c in row] for row in table.rows])
    return buffer.getvalue()


def write_table(table: Table, out_dir: Path) -> list[Path]:
    """Write <name>.md, <name>.tex and <name>.csv under out_dir (atomically); returns their paths."""
    paths = []
    for suffix, render in ((".md", to_markdown), (".tex", to_latex), (".csv", to_csv)):
        path = out_dir / f"{table.name}{suffix}"
        atomic_write_text(path, render(table))
        paths.append(path)
    return paths

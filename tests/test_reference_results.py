"""The committed runs behind the README (results/reference/) rebuild its numbers: every mean ± std the
README's tiny-profile table quotes is a Macro cell of Table 1 or a Table 6 value built from them now."""

from __future__ import annotations

import re
from pathlib import Path

from gropd.report import build

REPO = Path(__file__).resolve().parents[1]


def readme_table_cells() -> list[str]:
    """The 'mean ± std' cells and the plain before/teacher numbers of the README's tiny-profile table."""
    text = (REPO / "README.md").read_text()
    table = text[text.index("| pairing | student before | teacher | GR-OPD |") :].split("\n\n", 1)[0]
    return re.findall(r"\d+\.\d\d ± \d+\.\d\d|(?<=\| )\d+\.\d\d(?= \|)", table)


def test_the_readme_numbers_come_from_the_committed_runs(tmp_path: Path) -> None:
    written = build(
        ["table1", "table6"],
        profile="tiny",
        results_root=REPO / "results" / "reference",
        experiments_dir=REPO / "experiments",
        out_root=tmp_path,
    )
    built = "".join(path.read_text() for path in written if path.suffix == ".md")
    table6 = {f"{float(v):.2f}" for v in re.findall(r"\| (\d+\.\d{3}) \|", built)}
    cells = readme_table_cells()
    assert len(cells) >= 15, cells
    missing = [cell for cell in cells if cell not in built and cell not in table6]
    assert not missing, f"README cells not rebuilt from results/reference: {missing}"

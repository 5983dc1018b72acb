"""The committed runs behind the README (results/reference/) rebuild its numbers: every mean ± std, every plain
before/teacher number and every paired interval the README's tiny-profile table quotes is in Table 1 or Table 6
built from them now (the README's − is the tables' -)."""

from __future__ import annotations

import re
from pathlib import Path

from gropd.report import build

REPO = Path(__file__).resolve().parents[1]
INTERVAL = r"[+−-]\d+\.\d\d \[[+−-]\d+\.\d\d, [+−-]\d+\.\d\d\]"


def readme_table() -> str:
    text = (REPO / "README.md").read_text()
    return text[text.index("| pairing | student before | teacher | GR-OPD |") :].split("\n\n", 1)[0]


def test_the_readme_numbers_come_from_the_committed_runs(tmp_path: Path) -> None:
    written = build(
        ["table1", "table6"],
        profile="tiny",
        results_root=REPO / "results" / "reference",
        experiments_dir=REPO / "experiments",
        out_root=tmp_path,
    )
    built = "".join(path.read_text() for path in written if path.suffix == ".md")
    table = readme_table()
    cells = re.findall(r"\d+\.\d\d ± \d+\.\d\d|(?<=\| )\d+\.\d\d(?= \|)", table)
    intervals = [found.replace("−", "-") for found in re.findall(INTERVAL, table)]
    assert len(cells) >= 15 and len(intervals) >= 3, (cells, intervals)
    missing = [cell for cell in cells + intervals if cell not in built]
    assert not missing, f"README numbers not rebuilt from results/reference: {missing}"

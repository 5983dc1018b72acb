"""The front page: README's results and reproducibility blocks are what gropd/report/front_page.py builds from the
committed runs (a changed committed number fails this until README is rebuilt), README stays short, and the
reviewer page built from the committed runs reads naturally and stays small."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from gropd.report import build, front_page
from gropd.report.front_page import BLOCKS, blocks, main, marker, replaced

REPO = Path(__file__).resolve().parents[1]
REFERENCE = REPO / "results" / "reference"


def test_readmes_blocks_are_a_fresh_build_from_the_committed_runs(monkeypatch, capsys) -> None:
    monkeypatch.chdir(REPO)
    assert main(["--check"]) == 0, capsys.readouterr().out


def test_readme_is_a_front_page_not_a_notebook() -> None:
    lines = (REPO / "README.md").read_text().splitlines()
    assert len(lines) <= 250
    for name in BLOCKS:
        start, end = marker(name)
        assert lines.count(start) == 1 and lines.count(end) == 1


def test_a_changed_committed_number_fails_the_check_until_the_readme_is_rebuilt(tmp_path, monkeypatch, capsys):
    """One Macro of a committed run's eval/summary.json changed in a scratch copy: `--check` fails naming the block,
    `--write` rebuilds it, and the rebuilt README equals what the changed results give (one build, for the cost)."""
    monkeypatch.chdir(REPO)
    results, readme = tmp_path / "results", tmp_path / "README.md"
    shutil.copytree(REFERENCE, results)
    shutil.copy(REPO / "README.md", readme)
    summary = results / "tiny" / "table1__B4-B1.7__gropd" / "eval" / "summary.json"
    record = json.loads(summary.read_text())
    record["macro"] += 0.5
    summary.write_text(json.dumps(record))
    fresh = blocks(results)
    monkeypatch.setattr(front_page, "blocks", lambda _results: fresh)
    assert main(["--check", "--results", str(results), "--readme", str(readme)]) == 1
    assert "block 'results' differs from a fresh build" in capsys.readouterr().out
    assert main(["--write", "--results", str(results), "--readme", str(readme)]) == 0
    assert main(["--check", "--results", str(results), "--readme", str(readme)]) == 0
    assert readme.read_text() != (REPO / "README.md").read_text()


def test_a_block_is_replaced_between_its_markers_only() -> None:
    start, end = marker("results")
    readme = f"head\n{start}\nold\n{end}\ntail\n"
    assert replaced(readme, "results", ["new", "lines"]) == f"head\n{start}\nnew\nlines\n{end}\ntail\n"
    with pytest.raises(ValueError, match="lacks the markers of block 'reproducibility'"):
        replaced(readme, "reproducibility", ["x"])


def test_the_reviewer_page_of_the_committed_runs_reads_naturally_and_stays_small(tmp_path) -> None:
    names = ["table1", "table2", "fig1", "fig3", "fig4", "table3", "table4", "table5", "table6", "claims"]
    build(names, profile="tiny", results_root=REFERENCE, experiments_dir=REPO / "experiments", out_root=tmp_path)
    page = (tmp_path / "tiny" / "index.html").read_text()
    assert len(page.encode()) <= 900_000
    assert "None" not in page and "only 0 " not in page

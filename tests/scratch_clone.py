"""A scratch clone for front-door tests that must never reach the repository's files: the fixture `scratch` (a fresh
clone's layout as the working directory, its tiny world a folder of its own, a committed set with READ_ONLY) and
`refused` (a command exits 2 with one line and changes nothing)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from test_front_door import RUN, clone
from tiny_runs import native_profile
from tree_snapshot import changes, snapshot

from gropd import cli

REFERENCE = Path(__file__).resolve().parents[1] / "results" / "reference"


@pytest.fixture(name="scratch")
def scratch_fixture(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh clone's layout in tmp_path/repo as the working directory, its tiny world a folder of its own (nothing
    here may reach the repository's models), a committed set results/reference (READ_ONLY) with one run."""
    (tmp_path / "repo").mkdir()
    root = clone(tmp_path / "repo", venv=False)
    native_profile(root / "experiments")
    (root / "results" / "tiny" / "world").unlink()
    (root / "results" / "tiny" / "world" / "abc").mkdir(parents=True)
    committed = root / "results" / "reference" / "tiny" / RUN
    committed.mkdir(parents=True)
    (committed / "metrics.jsonl").write_text('{"step": 1}\n' * 100)
    shutil.copy(REFERENCE / "READ_ONLY", root / "results" / "reference" / "READ_ONLY")
    monkeypatch.chdir(root)
    return root


def refused(root: Path, argv: list[str], capsys: pytest.CaptureFixture) -> str:
    """cli.main(argv) exits 2 with one line and nothing under tmp_path (the clone's parent too) changes."""
    before = snapshot(root.parent)
    capsys.readouterr()
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith("error: ") and changes(before, snapshot(root.parent)) == []
    return err

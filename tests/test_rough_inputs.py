"""Rough inputs of the fourth front-door round (issue 53): each replayed on a scratch project (tmp_path) and
answered with a one-line error, or with the right behaviour, never a traceback or a misleading line."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from test_front_door import clone
from tiny_runs import REPO

from gropd import cli

RUN = "table1__I4nothink-I1.7nothink__gropd"
OTHER = "table1__I4nothink-I1.7nothink__opd"
REFERENCE = REPO / "results" / "reference" / "tiny"
BIG = "1" * 5000  # over Python's 4,300-digit limit on int() of a string


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh clone's layout (tests/test_front_door.py: clone) as the current directory: its tiny profile as
    committed, so copies of the committed runs keep their config hashes."""
    monkeypatch.chdir(clone(tmp_path, venv=False))
    return tmp_path


def committed(root: Path, *run_ids: str) -> dict[str, Path]:
    """Copies of committed reference runs in the project's results/tiny/; run id -> its status.json."""
    for run_id in run_ids:
        shutil.copytree(REFERENCE / run_id, root / "results" / "tiny" / run_id)
    return {run_id: root / "results" / "tiny" / run_id / "status.json" for run_id in run_ids}


def status_table(capsys: pytest.CaptureFixture) -> dict[str, str]:
    """`status --profile tiny` (exit 0): run id -> its whole line."""
    capsys.readouterr()
    assert cli.main(["status", "--profile", "tiny"]) == 0
    return {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[2:-1]}


# --- integers too long to read ---------------------------------------------------------------------------

COMMANDS = {
    "run": ["run", RUN, "--profile", "tiny"],
    "grid": ["grid", "table1", "--profile", "tiny", "--dry-run"],
    "runs": ["runs", "--profile", "tiny", "--grid", "table1"],
    "status": ["status", "--profile", "tiny"],
}


@pytest.mark.parametrize("command", COMMANDS)
def test_an_integer_over_4300_digits_on_the_command_line_is_one_line(root: Path, command: str, capsys) -> None:
    capsys.readouterr()
    assert cli.main([*COMMANDS[command], f"train.steps={BIG}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and len(err) < 300, err
    assert err.startswith(f"error: command line: train.steps: value {'1' * 30!r}... (5,000 characters) is not valid")
    assert "an integer of 5,000 digits at line 1, column 1: at most 4,300 are read" in err


@pytest.mark.parametrize("command", COMMANDS)
def test_an_integer_over_4300_digits_in_a_run_file_names_the_file(root: Path, command: str, capsys) -> None:
    path = root / "experiments" / "runs" / "tiny" / f"{RUN}.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(f"run_id: {RUN}\npairing: I4nothink-I1.7nothink\ntrain:\n  steps: {BIG}\n")
    expected = (
        f"experiments/runs/tiny/{RUN}.yaml: <top level>: not valid YAML: "
        "an integer of 5,000 digits at line 4, column 10: at most 4,300 are read"
    )
    capsys.readouterr()
    if command == "status":  # its row is broken, the table goes on
        assert status_table(capsys)[RUN].split()[1:3] == ["broken", expected.split()[0]]
        return
    assert cli.main(COMMANDS[command]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {expected}\n"

"""Issue 53's fifth bad case, replayed: a non-finite loss ends the run as a collapse ("non-finite loss", its step),
logged (the progress line formatted None and raised TypeError: the run "failed", and a rerun alike) and recorded in
status.json, so that reports count it as a collapse, not as missing. A finite run's numbers are untouched."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_front_door import RUN
from tiny_runs import FAST

from gropd import cli
from gropd.config.schema import CollapseRule
from gropd.record.run_dir import RunDir
from gropd.report import build
from gropd.train.loop import collapse_reason
from gropd.train.step import print_progress


def test_the_progress_line_of_a_nan_loss_says_nan(capsys) -> None:
    """A NaN loss is written None; the progress line formatted None and raised TypeError (the run "failed")."""
    record = {"step": 3, "verifier_reward": 0.5, "mean_response_len": 40.0, "loss": None, "mean_abs_feedback": None}
    print_progress("r", record, total=10, started=0.0, first_step=1)
    assert "step 3/10 reward 0.500 len 40.0 loss nan |f| nan ETA" in capsys.readouterr().err
    print_progress("r", record | {"loss": 0.123456, "mean_abs_feedback": 0.25}, total=10, started=0.0, first_step=1)
    assert "step 3/10 reward 0.500 len 40.0 loss +0.1235 |f| 0.250 ETA" in capsys.readouterr().err  # as it was
    rule = CollapseRule(
        reward_window=2, reward_fraction=0.5, reward_patience=2, len_cap_fraction=0.9, len_cap_patience=3
    )
    assert collapse_reason([record | {"frac_at_len_cap": 0.0}], rule) == "non-finite loss (nan) at step 3"


@pytest.mark.slow
def test_a_nan_loss_ends_the_run_collapsed_and_the_table_counts_it(root: Path, capsys) -> None:
    """gropd.lam=1e300 on the tiny world: the loss is NaN at step 1; the run ends "collapsed" there (it "failed: a
    TypeError", and so did a rerun), and Table 1 counts it as a collapse of its own (unregistered) setting."""
    argv = ["run", RUN, "--profile", "tiny", *FAST, "train.steps=3", "gropd.lam=1e300"]
    assert cli.main(argv) == 0
    out, err = capsys.readouterr()
    assert f"{RUN}: collapsed (non-finite loss (nan) at step 1)" in out and "loss nan" in err
    status = RunDir(root / "results" / "tiny" / RUN).read_status()
    assert (status["status"], status["collapse_step"], status["step"]) == ("collapsed", 1, 1)
    assert status["set_by"]["gropd.lam"] == "command line"
    assert cli.main(argv) == 0 and "already collapsed" in capsys.readouterr().err
    written = build(["table1"], profile="tiny", results_root=root / "results", experiments_dir=root / "experiments",
                    out_root=root / "out")  # fmt: skip
    table = next(path for path in written if path.name == "table1.md").read_text()
    row = next(line for line in table.splitlines() if "[not the registered setting: " in line)
    assert "gropd.lam=1e+300" in row and "| 1 collapsed |" in row, table
    assert f"`{RUN}`: collapsed at step 1: non-finite loss (nan) at step 1" in table

"""Issue 53's first bad case, replayed: the registered setting of a grid entry comes from the grids and the profile
alone. An edited run file (experiments/runs/<profile>/<id>.yaml) never redefines it: editing one without running it
relabelled the committed runs, and a run of one joined the registered row and the claims as plain "vanilla OPD"."""

from __future__ import annotations

import shutil
from pathlib import Path

from report_fixtures import P3, TINY_SUITES, metric_rows, summary, write_run
from test_results_integrity import built, cross

from gropd.config import load_manifests
from gropd.config.grids import grid_entry, run_file_path, write_run_file
from gropd.runs.plan import plan_run_id


def edited_run_file(experiments: Path, run_id: str, text: str) -> Path:
    """The run file `grid` writes for `run_id`, with `text` appended as a user's edit."""
    path = run_file_path(experiments, "tiny", run_id)
    write_run_file(grid_entry(run_id, experiments, path), path)
    path.write_text(path.read_text() + text)
    return path


def test_editing_a_run_file_without_running_it_relabels_no_committed_run(tmp_path: Path) -> None:
    """`train: {steps: 120}` in a committed run's run file, nothing run: table1.md and the claims page are as they
    were (they said "[not the registered setting: train.steps=…]" of the committed runs, and dropped their cells)."""
    cross(tmp_path)
    before = built(tmp_path)
    edited_run_file(tmp_path / "experiments", f"table1__{P3}__opd", "train: {steps: 120}\n")
    assert built(tmp_path) == before


def test_a_run_of_an_edited_run_file_is_its_own_row_named_by_the_file_and_in_no_claim(tmp_path: Path) -> None:
    """The committed seed-0 vanilla OPD run replaced by a 2-step, 5-question run of its edited run file: its own
    row, labelled by what differs and the file that set it; the registered row and the claims name the seed as run
    with another setting, and no claim reads its number (Macro 30)."""
    cross(tmp_path)
    run_id, experiments, results = f"table1__{P3}__opd", tmp_path / "experiments", tmp_path / "results"
    path = edited_run_file(experiments, run_id, "train: {steps: 2}\n")
    plan = plan_run_id(load_manifests(experiments), "tiny", run_id, ["eval.questions=5"], results)  # status.json's
    assert plan.set_by == {"train.steps": f"edited run file {path}", "eval.questions": "command line"}
    shutil.rmtree(results / "tiny" / run_id)
    config = {"train": {"steps": 2}, "eval": {"questions": 5}}
    rows = metric_rows(2, verifier_reward=0.3, mean_response_len=60.0)
    five = summary({"add": 29.0, "sub": 30.0, "mul": 31.0}, questions=dict.fromkeys(TINY_SUITES, 5))  # Macro 30
    write_run(results, "tiny", run_id, config=config, metrics=rows, eval_summary=five,
              fields={"set_by": plan.set_by})  # fmt: skip
    after = built(tmp_path)
    rows = [line for line in after["table1.md"].splitlines() if "I4think" in line and "vanilla OPD" in line]
    label = f"[not the registered setting: train.steps=2, eval.questions=5, set by the edited run file {path}]"
    registered, other = sorted(rows, key=lambda row: label in row)
    assert len(rows) == 2 and "not the registered" not in registered and "30.00" not in registered
    assert label in other and "30.00" in other and other.endswith("| 30.00 | — |")  # no Δ: compared with nothing
    gropd_row = next(line for line in after["table1.md"].splitlines() if "I4think" in line and "GR-OPD" in line)
    assert gropd_row.endswith("| +0.00 [+0.00, +0.00] (n=2), not resolved |")  # vs the registered seeds 1, 2 only
    assert "30.00" not in after["claims.md"] and "(n=1)" not in after["claims.md"]
    named = f"`{run_id}`: ran another setting than the registered one (train.steps=2, eval.questions=5"
    assert named in after["table1.md"] and named in after["claims.md"]

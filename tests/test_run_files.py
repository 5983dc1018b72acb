"""Broken run files under results/ (gropd/record/run_dir.py): exit status 2 and a message naming the file
and what to do, with every file under results/ left byte-identical; a torn last line of
metrics.jsonl is dropped (resume cuts back to the checkpoint; reports say so); --force redoes a
broken run.

One real 2-step tiny run (a checkpoint after each step) is made once; each test breaks a copy.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from report_fixtures import P1, write_experiments, write_run
from tiny_runs import project

from gropd import cli
from gropd.config import data_hash
from gropd.record.run_dir import RunDir

pytestmark = pytest.mark.slow
RUN = "table1__I4nothink-I1.7nothink__gropd"
SETTINGS = ["train.steps=2", "train.checkpoint_every=1", "eval.questions=2", "eval.suites=[add]"]
RUN_CLI = ["run", RUN, "--profile", "tiny", *SETTINGS]
TIMING = ("time_rollout_s", "time_teacher_s", "time_update_s")


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project whose results/ hold RUN, finished, with checkpoints of steps 1 and 2."""
    root = project(tmp_path_factory.mktemp("finished"))
    previous = Path.cwd()
    os.chdir(root)
    try:
        assert cli.main(RUN_CLI) == 0
    finally:
        os.chdir(previous)
    return root


@pytest.fixture
def root(finished: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private copy of the finished project, as the current directory."""
    copy = tmp_path / "project"
    shutil.copytree(finished, copy, symlinks=True)
    monkeypatch.chdir(copy)
    return copy


def run_dir(root: Path) -> RunDir:
    return RunDir(root / "results" / "tiny" / RUN)


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under results/ (the linked tiny world not followed) with its bytes."""
    files = {}
    for folder, _, names in os.walk(root / "results"):
        for name in names:
            path = Path(folder) / name
            files[str(path.relative_to(root))] = path.read_bytes()
    return files


def crashed(root: Path) -> RunDir:
    """The run as a crash during training leaves it: status running (checkpoints kept)."""
    rd = run_dir(root)
    rd.update_status(status="running")
    return rd


def assert_refused(root: Path, argv: list[str], broken: Path, capsys: pytest.CaptureFixture) -> str:
    """cli.main(argv) exits 2 naming `broken` and a way out, and changes nothing under results/."""
    before = snapshot(root)
    capsys.readouterr()
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert f"error: {broken.relative_to(root)}: " in err
    assert "delete " in err and "--force" in err
    assert snapshot(root) == before
    return err


@pytest.mark.parametrize(
    "argv",
    [
        ["grid", "table1", "--profile", "tiny", "--dry-run", *SETTINGS],
        RUN_CLI,
        ["runs", "--profile", "tiny", "--grid", "table1"],
        ["report", "table1", "--profile", "tiny"],
    ],
    ids=["grid-dry-run", "run", "runs", "report"],
)
def test_status_json_not_valid_json(root: Path, argv: list[str], capsys: pytest.CaptureFixture) -> None:
    rd = run_dir(root)
    rd.status_path.write_text("{bad json")
    err = assert_refused(root, argv, rd.status_path, capsys)
    assert "not valid JSON" in err


@pytest.mark.parametrize(
    ("text", "problem"),
    [("", "empty"), ("[1, 2]", "not a JSON object"), ('{"status": "done", "config_hash": "x"}', "status is 'done'")],
)
def test_status_json_empty_or_not_a_status(root: Path, text: str, problem: str, capsys) -> None:
    rd = run_dir(root)
    rd.status_path.write_text(text)
    assert problem in assert_refused(root, RUN_CLI, rd.status_path, capsys)


def test_config_yaml_not_valid_yaml(root: Path, capsys: pytest.CaptureFixture) -> None:
    rd = run_dir(root)
    rd.config_path.write_text("train: {steps: [2\n")
    assert "not valid YAML" in assert_refused(root, RUN_CLI, rd.config_path, capsys)


def test_config_yaml_cut_short(root: Path, capsys: pytest.CaptureFixture) -> None:
    rd = run_dir(root)
    lines = rd.config_path.read_text().splitlines(keepends=True)
    rd.config_path.write_text("".join(lines[: len(lines) // 2]))  # still valid YAML, but not the run's config
    err = assert_refused(root, ["grid", "table1", "--profile", "tiny", "--dry-run", *SETTINGS], rd.config_path, capsys)
    assert "does not match config_hash" in err


def test_metrics_line_corrupt_before_the_end(root: Path, capsys: pytest.CaptureFixture) -> None:
    rd = crashed(root)
    lines = rd.metrics_path.read_text().splitlines(keepends=True)
    rd.metrics_path.write_text(lines[0][:20] + "\n" + "".join(lines[1:]))
    assert "line 1 is not valid JSON" in assert_refused(root, RUN_CLI, rd.metrics_path, capsys)


@pytest.mark.parametrize("name", ["model.safetensors", "optimizer.bin", "trainer_state.json"])
@pytest.mark.parametrize("damage", ["cut short", "missing"])
def test_latest_checkpoint_file_cut_short_or_missing(root: Path, name: str, damage: str, capsys) -> None:
    rd = crashed(root)
    path = rd.checkpoints / "step_2" / name
    if damage == "missing":
        path.unlink()
    else:
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    err = assert_refused(root, RUN_CLI, path, capsys)
    assert damage in err and f"delete {(rd.checkpoints / 'step_2').relative_to(root)} (the run resumes" in err


def test_final_model_cut_short(root: Path, capsys: pytest.CaptureFixture) -> None:
    rd = run_dir(root)
    rd.update_status(status="trained")  # trained, evaluation not finished: it reads final/
    path = rd.final / "model.safetensors"
    path.write_bytes(path.read_bytes()[:1000])
    assert "cut short" in assert_refused(root, RUN_CLI, path, capsys)


def test_force_redoes_a_run_whose_status_is_broken(root: Path) -> None:
    rd = run_dir(root)
    rd.status_path.write_text("{bad json")
    assert cli.main([*RUN_CLI, "--force"]) == 0
    assert rd.read_status()["status"] == "finished" and [r["step"] for r in rd.read_metrics()] == [1, 2]


def test_torn_last_metrics_line_resume_cuts_back_to_the_checkpoint(root: Path, capsys) -> None:
    """A crash in step 2 after checkpoint 1, mid-append: resuming drops the torn line, says so, and
    gives the metrics of the uninterrupted run (same machine, same threads: bit-identical)."""
    rd = crashed(root)
    whole = [{k: v for k, v in row.items() if k not in TIMING} for row in rd.read_metrics()]
    shutil.rmtree(rd.checkpoints / "step_2")
    with rd.metrics_path.open("a") as handle:
        handle.write('{"step": 3, "loss": 0.1')
    capsys.readouterr()
    assert cli.main(RUN_CLI) == 0
    err = capsys.readouterr().err
    assert f"note: {rd.metrics_path.relative_to(root)}: last line is incomplete" in err
    assert "resuming after step 1" in err
    assert [{k: v for k, v in row.items() if k not in TIMING} for row in rd.read_metrics()] == whole
    assert rd.read_status()["status"] == "finished"


EVALUATE_CLI = ["evaluate", RUN, "--profile", "tiny", *SETTINGS]


def test_evaluate_alone_gives_the_records_of_the_evaluation_after_training(root: Path, capsys) -> None:
    """`gropd.cli evaluate` of a trained run (as after a multi-process training) writes what the
    evaluation after a one-process training wrote, byte for byte, and finishes the run; again, it does nothing."""
    rd = run_dir(root)
    before = {path.name: path.read_bytes() for path in rd.eval_dir.glob("*.jsonl")}
    shutil.rmtree(rd.eval_dir)
    rd.update_status(status="trained")
    assert cli.main(EVALUATE_CLI) == 0
    assert {path.name: path.read_bytes() for path in rd.eval_dir.glob("*.jsonl")} == before
    assert rd.read_status()["status"] == "finished" and rd.summary_path.exists()
    capsys.readouterr()
    assert cli.main(EVALUATE_CLI) == 0 and "already finished; nothing to evaluate" in capsys.readouterr().err


def test_evaluate_refuses_a_run_still_training(root: Path, capsys) -> None:
    crashed(root)
    before = snapshot(root)
    capsys.readouterr()
    assert cli.main(EVALUATE_CLI) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "(train) is resumable (running)" in err and "gropd.cli run" in err
    assert snapshot(root) == before


def lambda_results(root: Path) -> Path:
    """experiments/ and results/ of the report fixtures, with one GR-OPD run of the lambda grid."""
    write_experiments(root, steps=3)  # the run below ran all its 3 steps
    rows = [{"step": s, "pressure_normalised": float(s), "pressure_retained": s / 2} for s in (1, 2, 3)]
    write_run(root / "results", "tiny", f"lambda__{P1}__gropd-lam0.5", fields={"pairing": P1, "lam": 0.5}, metrics=rows)
    return root / "results" / "tiny" / f"lambda__{P1}__gropd-lam0.5" / "metrics.jsonl"


def test_reports_drop_a_torn_last_metrics_line_and_say_so(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    metrics = lambda_results(tmp_path)
    table = tmp_path / "paper_figures" / "tiny" / "table2.md"
    assert cli.main(["report", "table2", "--profile", "tiny"]) == 0
    clean = table.read_text()
    assert "| 2.00 | 1.00 |" in clean  # hand: mean of 1, 2, 3 and of .5, 1, 1.5
    with metrics.open("a") as handle:
        handle.write('{"step": 4, "pressure_normalised": 4')
    capsys.readouterr()
    assert cli.main(["report", "table2", "--profile", "tiny"]) == 0
    assert table.read_text() == clean
    assert f"note: {metrics.relative_to(tmp_path)}: last line is incomplete (a write cut short); ignored" in (
        capsys.readouterr().err
    )


def test_reports_refuse_a_corrupt_metrics_line_before_the_end(tmp_path: Path, monkeypatch, capsys) -> None:
    monkeypatch.chdir(tmp_path)
    metrics = lambda_results(tmp_path)
    metrics.write_text("{oops\n" + metrics.read_text())
    assert "line 1 is not valid JSON" in assert_refused(
        tmp_path, ["report", "table2", "--profile", "tiny"], metrics, capsys
    )


def test_a_saved_config_hashes_to_its_config_hash(finished: Path) -> None:
    """RunDir.check's premise: config.yaml read back gives the config_hash status.json records."""
    rd = run_dir(finished)
    assert data_hash(rd.read_config()) == rd.read_status()["config_hash"]

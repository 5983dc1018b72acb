"""Tracking through accelerate's trackers: TensorBoard events equal metrics.jsonl, resume repeats no
step, the config goes in as hyper-parameters, a missing backend is a clear error."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import yaml
from tiny_runs import tiny_config

from gropd.cli import main
from gropd.config import config_hash, load_manifests
from gropd.config.schema import TrackingSettings
from gropd.model.optional import MissingDependencyError
from gropd.record import tracking
from gropd.record.run_dir import RunDir
from gropd.record.tracking import check_backends, hyperparameters, summary_scalars
from gropd.runs.pipeline import execute

RUN = "table1__I4nothink-I1.7nothink__gropd"


def scalars(run_dir: RunDir) -> dict[str, list[tuple[int, float]]]:
    """Every scalar series of the run's TensorBoard directory, as TensorBoard's reader sees it."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    reader = EventAccumulator(str(run_dir.root / "tracking" / "gropd"), size_guidance={"scalars": 0})
    reader.Reload()
    return {tag: [(e.step, e.value) for e in reader.Scalars(tag)] for tag in reader.Tags()["scalars"]}


def expected_series(run_dir: RunDir) -> dict[str, list[tuple[int, float]]]:
    """metrics.jsonl as TensorBoard stores it (32-bit floats, None skipped), plus the eval summary."""
    series: dict[str, list[tuple[int, float]]] = {}
    records = run_dir.read_metrics()
    for record in records:
        for key, value in record.items():
            if key != "step" and value is not None:
                series.setdefault(key, []).append((record["step"], float(np.float32(value))))
    summary = yaml.safe_load((run_dir.eval_dir / "summary.json").read_text())
    for key, value in summary_scalars(summary).items():
        series[key] = [(records[-1]["step"] + 1, float(np.float32(value)))]  # the step after training
    return series


@pytest.mark.slow
def test_event_files_equal_metrics_and_summary(root: Path) -> None:
    config = tiny_config(root, RUN, ["train.steps=3", "eval.questions=2"])
    status = execute(config, load_manifests(root / "experiments"), root / "results")
    run_dir = RunDir(root / "results" / "tiny" / RUN)
    assert status["status"] == "finished"
    seen, want = scalars(run_dir), expected_series(run_dir)
    assert seen == want
    assert "eval/macro" in seen and "verifier_reward" in seen
    # the resolved config as hyper-parameters (accelerate keeps a YAML copy beside the event file)
    (hparams,) = (run_dir.root / "tracking" / "gropd").glob("*/hparams.yml")
    stored = yaml.safe_load(hparams.read_text())
    assert stored["gropd.lam"] == config.gropd.lam == 0.25 and stored["run_id"] == RUN
    assert stored["train.steps"] == 3


@pytest.mark.slow
def resume_after_a_dead_session(root: Path, same_second: bool = False) -> RunDir:
    """A crash after step 4 with the last checkpoint at 2, the dead session having written other values for steps
    3 and 4 (e.g. a nondeterministic GPU); then the run resumed. `same_second`: the resumed session opens its event
    files in the second of the dead session's, whose file sorts last of that second ("~" after every digit)."""
    import time

    from torch.utils.tensorboard import SummaryWriter

    manifests = load_manifests(root / "experiments")
    config = tiny_config(root, RUN, ["train.steps=4", "train.checkpoint_every=2", "eval.questions=2"])
    execute(config, manifests, root / "results")
    run_dir = RunDir(root / "results" / "tiny" / RUN)
    shutil.rmtree(run_dir.checkpoints / "step_4")
    shutil.rmtree(run_dir.final)
    shutil.rmtree(run_dir.eval_dir)
    run_dir.update_status(status="running", step=4)
    events_dir = run_dir.root / "tracking" / "gropd"
    with SummaryWriter(str(events_dir)) as writer:
        for step in (3, 4):
            writer.add_scalar("verifier_reward", 99.0, step)
    if same_second:
        dead = max(events_dir.glob("events.out.tfevents.*"))
        second = int(dead.name.split(".")[3])
        dead.rename(events_dir / f"events.out.tfevents.{second:010d}.host.1.~")
        clock = {"now": second + 0.5}

        def sleep(seconds: float) -> None:
            clock["now"] += seconds

        # A frozen clock that moves only when tracking waits on it. Other sleeps stay real: subprocess's wait loop
        # (the code record's `git`) sleeps until a real deadline, and would run a fake clock hours ahead of the
        # evaluation's child process, whose event file would then sort before the training session's.
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(time, "time", lambda: clock["now"])
            patch.setattr(tracking, "time", SimpleNamespace(time=lambda: clock["now"], sleep=sleep))
            assert execute(config, manifests, root / "results")["status"] == "finished"
    else:
        assert execute(config, manifests, root / "results")["status"] == "finished"
    return run_dir


@pytest.mark.parametrize("same_second", [False, True])
def test_resume_repeats_no_step_and_keeps_the_replayed_values(root: Path, same_second: bool) -> None:
    """The resumed session logs 3 and 4 again; readers see each step once, with metrics.jsonl's values, not those of
    the dead session, also when both sessions' event files carry the same second (gropd/record/tracking.py)."""
    run_dir = resume_after_a_dead_session(root, same_second)
    seen = scalars(run_dir)
    assert [step for step, _ in seen["verifier_reward"]] == [1, 2, 3, 4]
    assert all(len({s for s, _ in points}) == len(points) for points in seen.values())
    assert seen == expected_series(run_dir)


def test_missing_backend_is_a_clear_error(root: Path, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setitem(sys.modules, "wandb", None)  # import wandb now fails, installed or not
    with pytest.raises(MissingDependencyError, match="'wandb'.*pip install wandb"):
        check_backends(TrackingSettings(backends=["wandb"]))
    code = main(["run", RUN, "--profile", "tiny", "tracking.backends=[wandb]"])
    assert code == 2 and "pip install wandb" in capsys.readouterr().err
    assert not (root / "results" / "tiny" / RUN).exists()


def test_tracking_is_not_part_of_a_runs_identity(root: Path) -> None:
    plain = tiny_config(root, RUN, [])
    assert config_hash(plain) == config_hash(tiny_config(root, RUN, ["tracking.backends=[]", "tracking.project=x"]))
    assert config_hash(plain) != config_hash(tiny_config(root, RUN, ["gropd.lam=0.5"]))
    assert plain.tracking.backends == ["tensorboard"]  # on by default (train.yaml)


def test_hyperparameters_are_the_flattened_config(root: Path) -> None:
    config = tiny_config(root, RUN, [])
    flat = hyperparameters(config)
    assert flat["train.optimizer.lr"] == config.train.optimizer.lr
    assert flat["train.optimizer.betas"] == "[0.9, 0.999]"
    assert flat["eval.sampling.nothink.top_p"] == config.eval.sampling["nothink"].top_p
    assert all(not isinstance(value, (dict, list)) for value in flat.values())


def test_summary_scalars() -> None:
    summary = {
        "model": "m",
        "mode": "nothink",
        "macro": 12.5,
        "suites": {"add": {"avg_at_k": 25.0, "k": 4, "paper_questions": None, "mean_tokens": 7.5}},
    }
    assert summary_scalars(summary) == {
        "eval/macro": 12.5,
        "eval/add/avg_at_k": 25.0,
        "eval/add/k": 4,
        "eval/add/mean_tokens": 7.5,
    }


@pytest.mark.parametrize("project", ["/tmp/elsewhere", "../../../../x", "a/b", ".."])
def test_a_tracking_project_is_one_folder_of_the_run(root: Path, capsys, project: str) -> None:
    """tracking.project names a folder under the run's tracking/ (a single path component): a path that leads out
    of results/ is refused before anything is written."""
    code = main(["run", RUN, "--profile", "tiny", f"tracking.project={project}"])
    assert code == 2 and "tracking.project" in capsys.readouterr().err
    assert not (root / "results" / "tiny" / RUN).exists() and not Path("/tmp/elsewhere").exists()

"""Issue 65, the four bad cases of the fifth front-door round: a record that contradicts itself is a broken run, never
a collapse or a number (a status "collapsed" its metrics do not bear out, a number outside the range its definition
allows, an evaluation of another size than configured, a finished run without its metric lines), a twin copies only
a sound record, a run resumes only from a checkpoint it could have written, and `--force` that cannot delete stops.
Each case here went through on the code before these checks (4757a4e)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from report_fixtures import P3
from test_front_door import clone
from test_results_integrity import built, cross, suite_set, verdict_of
from tiny_runs import FAST, REPO, native_profile
from tree_snapshot import changes, snapshot

from gropd import cli
from gropd.config import RunFileError, config_hash, load_manifests
from gropd.config.schema import CollapseRule
from gropd.record.collapse import collapse_reason
from gropd.record.ranges import METRIC_RANGES, NON_FINITE, metric_problem, planned_k, strict_record
from gropd.record.run_dir import RunDir, seal
from gropd.runs.pipeline import load_run, open_run_dir, planned_state

RUN = "table1__I4nothink-I1.7nothink__gropd"
TWIN = "lambda__I4nothink-I1.7nothink__gropd-lam0.25"  # the same settings under the λ sweep's id
DAMAGED = f"table1__{P3}__gropd__seed2"


def lines_set(run: RunDir, key: str, value: object, last: int = 10) -> None:
    """Set `key` of the last `last` records of the run's metrics.jsonl to `value`, written as json.dumps writes it
    (NaN and Infinity as the tokens a non-strict writer wrote)."""
    records = [json.loads(line) for line in run.metrics_path.read_text().splitlines()]
    for record in records[-last:]:
        record[key] = value
    run.metrics_path.write_text("".join(json.dumps(record) + "\n" for record in records))


CONTRADICTIONS = {  # each on GR-OPD seed 2 of I4think→B1.7 in `cross` (10 steps, train.steps 10, cap 200 tokens)
    "collapsed, collapse_step null": lambda run: run.update_status(status="collapsed", collapse_step=None),
    "collapsed at step 'abc'": lambda run: run.update_status(status="collapsed", collapse_step="abc"),
    "collapsed past its steps": lambda run: run.update_status(status="collapsed", collapse_step=500),
    "collapsed, no rule fired": lambda run: run.update_status(status="collapsed", collapse_step=10),
    "collapsed at a step before its last": lambda run: (
        lines_set(run, "loss", None, last=5),
        run.update_status(status="collapsed", collapse_step=4),
    ),
    "finished, no metric lines": lambda run: (run.metrics_path.write_text(""), run.update_status(step=0)),
    "response length past the cap": lambda run: lines_set(run, "mean_response_len", 500.0),
    "reward below 0": lambda run: lines_set(run, "verifier_reward", -1.0),
    "fraction above 1": lambda run: lines_set(run, "frac_at_len_cap", 1.5),
    "correlation above 1": lambda run: lines_set(run, "spearman_score_reward", 1.5),
    "more degenerate groups than groups": lambda run: lines_set(run, "degenerate_groups", 17),
    "NaN in a finished run": lambda run: lines_set(run, "verifier_reward", float("nan"), last=1),
    "Infinity in a finished run": lambda run: lines_set(run, "loss", float("inf"), last=1),
    "a flagged non-finite in a finished run": lambda run: lines_set(run, "non_finite", {"loss": "inf"}, last=1),
    "J_H of more informative prompts than prompts": lambda run: run.horizon_path.write_text(
        json.dumps({"horizons": [1], "values": [0.5], "informative": 1000, "prompts": 64, "reward": 0.5})
    ),
    "J_H beside a mean reward of 7": lambda run: run.horizon_path.write_text(
        json.dumps({"horizons": [1], "values": [0.5], "informative": 30, "prompts": 64, "reward": 7.0})
    ),
    "an evaluation of 5 questions (config: 300)": lambda run: suite_set(run, "questions", 5),
    "an evaluation at k 8 (K: 4)": lambda run: suite_set(run, "k", 8),
}


@pytest.mark.parametrize("case", list(CONTRADICTIONS))
def test_a_record_that_contradicts_itself_is_a_named_broken_run(tmp_path: Path, case: str) -> None:
    """Before: a status edited to "collapsed" made Table 1 count a collapse ("collapsed at step None") and flipped
    claim 3's cell; a length of 500 (cap 200) or a reward of −1 was a number ("64.9 → 500.0 (cap 200)"); an evaluation
    of 5 questions or K = 8 a Table 1 cell; NaN silently dropped; "1000 of 64 prompts informative; mean reward 7.000"
    printed as Figure 1's text."""
    cross(tmp_path)
    assert verdict_of(built(tmp_path)["claims.md"], "3") == "not reproduced"
    CONTRADICTIONS[case](RunDir(tmp_path / "results" / "tiny" / DAMAGED))
    after = built(tmp_path)
    cell = f"- I4think→B1.7: not tested — the record of {DAMAGED} is broken (see Missing)"
    assert cell in after["claims.md"].splitlines()
    assert f"`{DAMAGED}`: broken record: " in after["table1.md"]
    row = next(line for line in after["table1.md"].splitlines() if "I4think" in line and "GR-OPD" in line)
    assert "| 2 |" in row and "collapsed" not in row  # two seeds in the cell, no collapse counted


def test_a_step_count_that_is_not_a_number_is_named_as_written(tmp_path: Path) -> None:
    """status.json's step "10" (a string) was reported as "ends at step 10, but status.json at step 10"."""
    cross(tmp_path)
    run = RunDir(tmp_path / "results" / "tiny" / DAMAGED)
    run.update_status(step="10")
    problem = run.record_problem(run.read_status(), run.read_config(), run.read_metrics(), run.read_summary())
    assert problem == "metrics.jsonl ends at step 10, but status.json at step '10' (cut short?)"


def test_every_metric_range_is_the_definitions_and_the_committed_runs_hold_to_it() -> None:
    """The bounds by hand: a value just inside each bound passes, just outside fails, naming the metric and why."""
    config = {"sampling": {"max_new_tokens": 200}, "train": {"prompts_per_batch": 16, "optimizer": {"lr": 1e-4}}}
    high = {"mean_response_len": 200, "degenerate_groups": 16, "lr": 1e-4, "logprob_forwards_min": 6}
    for key, (least, most, why) in METRIC_RANGES.items():
        top = high.get(key, most)
        record = {"step": 3, key: least, "logprob_forwards_max": 6}
        assert metric_problem(record, config) is None, key
        if top != float("inf"):
            assert metric_problem(record | {key: top}, config) is None, key
            problem = metric_problem(record | {key: top * 1.5 + 1}, config)
            assert problem is not None and problem.startswith(f"step 3: {key} ") and why in problem, key
        below = metric_problem(record | {key: least - 0.5}, config)
        assert below is not None and key in below, key
    assert metric_problem({"step": 1, "spearman_score_reward": None}, config) is None  # undefined that batch


def test_every_committed_run_is_a_sound_record() -> None:
    """The 476 committed runs of results/reference, round7 and native (200, 152, 124) pass every check above: none
    was loosened to let one through."""
    suites = load_manifests(REPO / "experiments").suites["tiny"]
    read = 0
    for status_path in sorted(REPO.glob("results/*/tiny/*/status.json")):
        run = RunDir(status_path.parent)
        status, config = run.read_status(), run.read_config()
        record = (run.read_metrics(), run.read_summary(), run.read_horizon())
        assert run.record_problem(status, config, *record, planned_k(config, suites)) is None, run.root
        read += 1
    assert read == 476


def test_metrics_jsonl_is_strict_json_and_a_finite_record_keeps_its_bits() -> None:
    """`Infinity` was written as the token (not JSON) and read back as a number, a NaN as null with nothing said."""
    finite = {"step": 1, "loss": 0.1 + 0.2, "verifier_reward": 0.2265625, "pearson_score_len": None}
    assert strict_record(finite) is finite
    record = {"step": 2, "loss": float("inf"), "grad_norm": float("nan"), "lr": 1e-4}
    strict = strict_record(record)
    assert strict == {"step": 2, "loss": None, "grad_norm": None, "lr": 1e-4} | {
        NON_FINITE: {"loss": "inf", "grad_norm": "nan"}
    }
    assert json.loads(json.dumps(strict, allow_nan=False)) == strict
    rule = CollapseRule(
        reward_window=2, reward_fraction=0.5, reward_patience=2, len_cap_fraction=0.9, len_cap_patience=3
    )
    monitored = {"verifier_reward": 0.5, "frac_at_len_cap": 0.0}
    assert collapse_reason([strict | monitored], rule) == "non-finite loss (inf) at step 2"


# --- a twin copies only a sound record ---------------------------------------------------------------------------


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh clone's layout as the current directory (its tiny profile as committed: copies of committed runs keep
    their config hashes)."""
    monkeypatch.chdir(clone(tmp_path, venv=False))
    return tmp_path


def test_a_twin_copies_only_a_sound_record(root: Path, capsys) -> None:
    """A status edited to "collapsed" on a finished run was copied to its twin (copied_from) as a collapse."""
    shutil.copytree(REPO / "results" / "reference" / "tiny" / TWIN, root / "results" / "tiny" / TWIN)
    manifests = load_manifests(root / "experiments")
    config = load_run(manifests, "tiny", RUN)
    assert planned_state(config, root / "results", manifests) == f"new (results of {TWIN})"
    RunDir(root / "results" / "tiny" / TWIN).update_status(status="collapsed", collapse_step=None)
    assert planned_state(config, root / "results", manifests) == "new"
    capsys.readouterr()
    assert cli.main(["status", "--profile", "tiny"]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith(TWIN + " "))
    assert line.split()[1] == "broken" and "says collapsed at step None, not a step of the run's 1..100" in line


# --- a run resumes only from a checkpoint it could have written --------------------------------------------------


@pytest.fixture
def native(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh clone's layout as the current directory, its tiny profile native: a run in this process computes in
    the numerics torch was loaded with (tests/tiny_runs.py: native_profile)."""
    root = clone(tmp_path, venv=False)
    native_profile(root / "experiments")
    monkeypatch.chdir(root)
    return tmp_path


def opened(root: Path, steps_written: int) -> RunDir:
    """The run's directory as `run` opens it (config.yaml, status.json running at step 0) with metrics.jsonl holding
    steps 1..steps_written."""
    manifests = load_manifests(root / "experiments")
    run_dir = RunDir.at(root / "results", "tiny", RUN)
    open_run_dir(load_run(manifests, "tiny", RUN, FAST), manifests, run_dir)
    run_dir.metrics_path.write_text("".join(json.dumps({"step": s}) + "\n" for s in range(1, steps_written + 1)))
    return run_dir


def checkpoint(run_dir: RunDir, step: int, **state: object) -> Path:
    """A sealed checkpoints/step_<step>/ whose trainer_state.json holds `state` beside the step."""
    path = run_dir.checkpoints / f"step_{step}"
    path.mkdir(parents=True)
    (path / "trainer_state.json").write_text(json.dumps({"step": step, "sampler": {}, **state}))
    seal(path)
    return path


def own_hash(root: Path) -> str:
    return config_hash(load_run(load_manifests(root / "experiments"), "tiny", RUN, FAST))


RESUMES = {
    "a step past train.steps": (lambda root, run: checkpoint(run, 101, config_hash=own_hash(root)), "past this run's"),
    "another config's hash": (lambda root, run: checkpoint(run, 2, config_hash="0" * 16), "written by a run of config"),
    "no hash, no status.json": (
        lambda root, run: (checkpoint(run, 2), run.status_path.unlink(), run.config_path.unlink()),
        "records no config hash, and no status.json of this run vouches for it",
    ),
    "steps without metric lines": (
        lambda root, run: (checkpoint(run, 2, config_hash=own_hash(root)), run.metrics_path.write_text("")),
        "holds 0 records of steps 1..2, the steps checkpoint step_2 resumes after",
    ),
}


@pytest.mark.parametrize("case", list(RESUMES))
def test_a_run_resumes_only_from_a_checkpoint_it_could_have_written(native: Path, case: str, capsys) -> None:
    """A sealed checkpoint at step_101 of a 100-step run said "resuming after step 101" and ended "finished", step 0,
    empty metrics, its weights another run's; now: exit 2 naming the checkpoint, nothing written."""
    make, problem = RESUMES[case]
    run_dir = opened(native, steps_written=2)
    make(native, run_dir)
    before = snapshot(run_dir.root)  # (the lock under results/tiny/.locks is taken first)
    capsys.readouterr()
    assert cli.main(["run", RUN, "--profile", "tiny", *FAST]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and problem in err and "checkpoints/step_" in err, err
    assert changes(before, snapshot(run_dir.root)) == []


def test_a_checkpoint_from_before_hashes_resumes_where_its_runs_status_vouches_for_it(native: Path) -> None:
    run_dir = opened(native, steps_written=2)
    checkpoint(run_dir, 2)  # trainer_state.json as written before it recorded the config hash
    run_dir.check_resumable(own_hash(native), 100, vouched=True)
    with pytest.raises(RunFileError, match="records no config hash"):
        run_dir.check_resumable(own_hash(native), 100, vouched=False)


def test_a_run_that_says_finished_without_its_metric_lines_is_refused_not_done(native: Path, capsys) -> None:
    """Bad case 3's end state ("finished", step 0, empty metrics.jsonl): `run` said "already finished; nothing to
    do"; now exit 2 naming status.json and why, and the way out."""
    run_dir = opened(native, steps_written=0)
    run_dir.update_status(status="finished", step=0)
    capsys.readouterr()
    assert cli.main(["run", RUN, "--profile", "tiny", *FAST]) == 2
    err = capsys.readouterr().err
    assert f"{RUN}/status.json: says finished, but its record cannot be believed: status.json says finished" in err
    assert "but train.steps is 100 (cut short?)" in err and "--force" in err and "Traceback" not in err, err


# --- --force deletes everything or stops -------------------------------------------------------------------------


def test_force_that_cannot_delete_names_what_and_trains_nothing(native: Path, monkeypatch, capsys) -> None:
    """`shutil.rmtree(root, ignore_errors=True)`: with one file not deletable (NFS's `.nfs*`, another user's, a folder
    without write permission: a denied unlink here, since root's override makes mode 555 no obstacle) the run resumed
    from the old config's checkpoint and ended "finished", step 0, empty metrics."""
    run_dir = opened(native, steps_written=2)
    stuck = checkpoint(run_dir, 2, config_hash=own_hash(native)) / ".nfs000000001"
    stuck.write_text("held open by another client")
    unlink = os.unlink

    def refusing(path, *args, **kwargs):
        if str(path).endswith(stuck.name):
            raise PermissionError(13, "Permission denied", str(path))
        return unlink(path, *args, **kwargs)

    monkeypatch.setattr(os, "unlink", refusing)
    capsys.readouterr()
    assert cli.main(["run", RUN, "--profile", "tiny", *FAST, "--force"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "--force deletes the run's directory: cannot delete 1 path(s)" in err, err
    assert f"{stuck.relative_to(native)} (Permission denied)" in err
    assert stuck.exists() and not run_dir.status_path.exists() and not run_dir.metrics_path.exists()  # none trained

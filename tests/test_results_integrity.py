"""Results a reviewer can trust: a run id never leaves results/<profile>/, an override never changes which run a run
is, every setting is checked against what it will meet before the first byte, one writer per run directory, records
checked when read (a damaged one is a named missing run, never a number or a verdict), and publishing that leaves the
previous set whole whatever stops it. Each case here went through on the code before these checks existed."""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from report_fixtures import P3, P5, macro_summary, metric_rows, seeded, table1_grid, write_experiments, write_run
from test_front_door import RUN, clone
from test_reproduce_sh import REPO, copy_with_venv
from tiny_runs import native_profile
from tree_snapshot import changes, snapshot

from gropd import cli
from gropd.config import ConfigError, config_hash, config_yaml, load_manifests
from gropd.record.run_dir import RunDir
from gropd.record.run_lock import RunBusyError, current_holder, describe, hold_run, lock_paths, shard_ended
from gropd.report import build
from gropd.report.publish import swap_in
from gropd.runs.pipeline import load_run

ONLY = {"lambda": None, "gamma": None, "table6": None}


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh clone's layout in tmp_path/repo (tmp_path itself is where a run escaping results/ would land); its
    tiny profile native, since its runs compute in this process (tests/tiny_runs.py: native_profile)."""
    root = clone(tmp_path / "repo", venv=False) if (tmp_path / "repo").mkdir() is None else None
    native_profile(root / "experiments")
    monkeypatch.chdir(root)
    return root


def refused(root: Path, argv: list[str], capsys: pytest.CaptureFixture) -> str:
    """cli.main(argv) exits 2 and nothing anywhere under tmp_path (the clone's parent too) changes; returns stderr."""
    before = snapshot(root.parent)
    capsys.readouterr()
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and changes(before, snapshot(root.parent)) == []
    return err


# --- identity: run ids stay inside results/<profile>/, overrides never change which run a run is -------------------

IDENTITY_OVERRIDES = ["run_id=../../victim", "pairing=B4-B1.7", "method=fullkl", "seed=7", "kind=eval", "grid=other"]


@pytest.mark.parametrize("override", IDENTITY_OVERRIDES)
@pytest.mark.parametrize("force", [False, True])
def test_an_override_of_identity_is_refused_with_the_way_to_get_it(project, capsys, override, force) -> None:
    (project.parent / "victim").mkdir()
    (project.parent / "victim" / "precious.txt").write_text("keep me")
    argv = ["grid", "table1", "--profile", "tiny", override] + (["--force"] if force else [])
    err = refused(project, argv, capsys)
    key = override.split("=")[0]
    assert f"error: command line: {key}: an override cannot change which run a run is" in err
    assert "a run file of your own" in err and "--seeds N" in err
    assert (project.parent / "victim" / "precious.txt").read_text() == "keep me"


@pytest.mark.parametrize("run_id", ["..", ".", "../x", "a/b", ".hidden"])
def test_a_run_file_whose_run_id_is_not_one_path_component_is_refused(project, capsys, run_id) -> None:
    path = project / "experiments" / "runs" / "tiny" / f"{RUN}.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(yaml.safe_dump({"run_id": run_id}))
    for argv in (["run", RUN, "--profile", "tiny"], ["run", RUN, "--profile", "tiny", "--force"]):
        assert "run_id" in refused(project, argv, capsys)
    with pytest.raises(ConfigError, match="is not one path component"):
        RunDir.at(project / "results", "tiny", run_id)


def test_a_pairing_is_chosen_in_a_run_file_and_checked_there(project, capsys) -> None:
    path = project / "experiments" / "runs" / "tiny" / f"{RUN}.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(f"run_id: {RUN}\npairing: I8think-B1.7\nmethod: gropd\n")
    err = refused(project, ["run", RUN, "--profile", "tiny"], capsys)
    assert "pairing: 'I8think-B1.7' does not exist (expected one of I4nothink-I1.7nothink" in err


def test_a_grid_name_that_is_a_path_is_refused(project, capsys) -> None:
    (project / "experiments" / "evil").mkdir()
    (project / "experiments" / "evil" / "g.yaml").write_text("name: ../evil/g\nkind: train\n")
    assert "grid: '../evil/g' is not a grid name" in refused(
        project, ["grid", "../evil/g", "--profile", "tiny"], capsys
    )


# --- strict input ----------------------------------------------------------------------------------------------------

STRICT = [
    (["gropd.lam=0.1", "gropd.lam=0.9"], "command line: gropd.lam: given twice"),
    (["gropd={lam: 0.1}", "gropd.lam=0.9"], "command line: gropd.lam: given together with gropd"),
    (["train.steps=true"], "command line: train.steps: Input should be a valid integer (got True)"),
    (["gropd.lam=true"], "command line: gropd.lam: Input should be a valid number (got True)"),
    (["feedback.zero_format_tokens=1"], "Input should be a valid boolean"),
    (["eval.suites=[]"], "command line: eval.suites: List should have at least 1 item"),
    (["eval.suites=[add,sub,add]"], "command line: eval.suites: each suite once (named more than once: add)"),
    (["gropd={lam: 0.1, lam: 0.9}"], "found the key 'lam' twice"),
    (["train.optimizer.betas=[2,3]"], "train.optimizer.betas.0: Input should be less than 1"),
    (["train.prompts.source.kind=bogus"], "source.kind 'bogus' is not a prompt source (expected tiny or hub)"),
]


@pytest.mark.parametrize(("overrides", "message"), STRICT, ids=[" ".join(o) for o, _ in STRICT])
def test_strict_overrides(project, capsys, overrides, message) -> None:
    assert message in refused(project, ["grid", "table1", "--profile", "tiny", "--dry-run", *overrides], capsys)


def test_a_key_given_twice_in_a_run_file_or_a_grid_is_refused(project, capsys) -> None:
    path = project / "experiments" / "runs" / "tiny" / f"{RUN}.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(f"run_id: {RUN}\npairing: I4nothink-I1.7nothink\nmethod: gropd\ngropd:\n  lam: 0.25\n  lam: 0.0\n")
    assert "found the key 'lam' twice" in refused(project, ["run", RUN, "--profile", "tiny"], capsys)
    path.unlink()
    grid = project / "experiments" / "grids" / "table1.yaml"
    grid.write_text(grid.read_text() + "kind: train\n")
    assert "found the key 'kind' twice" in refused(
        project, ["grid", "table1", "--profile", "tiny", "--dry-run"], capsys
    )


def test_scientific_notation_is_a_number(project, capsys) -> None:
    """`1e-4` is a float (YAML 1.2; YAML 1.1 makes it a string), so a strict lr still takes it."""
    assert cli.main(["grid", "table1", "--profile", "tiny", "--dry-run", "train.optimizer.lr=1e-4"]) == 0


BEFORE_TRAINING = [
    (["eval.first_question=100000"], "questions 100000..100299 of suite add, which has 1000"),
    (["eval.first_question=900"], "questions 900..1199 of suite add, which has 1000"),
    (["eval.questions=100000"], "questions 500..100499 of suite add, which has 1000"),
    (["eval.first_question=1000", "eval.questions=null"], "questions 1000..999 of suite add"),
    (["backend.device=cuda"], "backend.device: cuda, but torch sees no CUDA device"),
    (["train.prompts.source.tasks=[nosuch]"], "unknown tiny task 'nosuch'; valid tasks: add, sub"),
    (["backend.teacher=server"], "backend.teacher: 'server', but no teacher server serves I4"),
    (["backend.teacher=vllm"], "backend.teacher=vllm (in-process teacher scoring) needs the Python package 'vllm'"),
    (["backend.rollout=vllm", "backend.old_logprobs=recompute"], "backend.rollout=vllm (student rollouts) needs"),
]


@pytest.mark.parametrize(("overrides", "message"), BEFORE_TRAINING, ids=[" ".join(o) for o, _ in BEFORE_TRAINING])
def test_settings_that_would_fail_after_training_are_refused_before_anything(project, capsys, overrides, message):
    if "cuda" in message and __import__("torch").cuda.is_available():
        pytest.skip("this machine has CUDA")
    if "'vllm'" in message and importlib.util.find_spec("vllm"):
        pytest.skip("this machine has vLLM")
    for argv in (["grid", "table1", "--profile", "tiny", "--dry-run"], ["run", RUN, "--profile", "tiny"]):
        assert message in refused(project, [*argv, *overrides], capsys)


@pytest.mark.parametrize(("seed", "message"), [("-1", "greater than or equal to 0"), (str(2**32), "less than or")])
def test_a_seed_out_of_range_is_refused(project, capsys, seed, message) -> None:
    path = project / "experiments" / "runs" / "tiny" / f"{RUN}.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(f"run_id: {RUN}\npairing: I4nothink-I1.7nothink\nmethod: gropd\nseed: {seed}\n")
    assert f"seed: Input should be {message}" in refused(project, ["run", RUN, "--profile", "tiny"], capsys)


def test_smaller_front_door_cases(project, capsys) -> None:
    """status with a bad override stops (before: exit 0, every row broken); --seeds past any experiment stops at
    once (before: 12 CPU-minutes); a run file that is a directory is named (before: a traceback)."""
    assert "train.steps: Input should be a valid integer (got 'abc')" in refused(
        project, ["status", "--profile", "tiny", "train.steps=abc"], capsys
    )
    started = time.monotonic()
    with pytest.raises(SystemExit) as stop:
        cli.main(["grid", "table1", "--profile", "tiny", "--dry-run", "--seeds", "100000"])
    assert stop.value.code == 2 and time.monotonic() - started < 5
    assert "at most 1000" in capsys.readouterr().err
    (project / "experiments" / "runs" / "tiny" / f"{RUN}.yaml").mkdir(parents=True)
    assert f"runs/tiny/{RUN}.yaml: <top level>: is not a file" in refused(
        project, ["grid", "table1", "--profile", "tiny", "--dry-run"], capsys
    )


def test_a_relative_results_directory_is_the_callers(tmp_path: Path) -> None:
    """`./reproduce.sh status --results mine` from another directory reads <that directory>/mine (before: the
    repository's mine)."""
    repo = clone(tmp_path / "repo") if (tmp_path / "repo").mkdir() is None else None
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "mine" / "tiny").mkdir(parents=True)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run(
        ["bash", str(repo / "reproduce.sh"), "status", "--profile", "tiny", "--results", "mine"],
        cwd=elsewhere,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert f"profile tiny ({elsewhere}/mine/tiny)" in result.stdout


# --- one writer per run -----------------------------------------------------------------------------------------------

HOLDER = """
import sys, time
from pathlib import Path
from gropd.record.run_lock import hold_run
with hold_run(Path(sys.argv[1])):
    print("held", flush=True)
    time.sleep(60)
"""


def test_a_filesystem_without_flock_is_refused_not_given_soft_locks(tmp_path, monkeypatch) -> None:
    """Where flock(2) fails with ENOSYS (Lustre without -o flock) filelock falls back to a soft lock file that a
    killed holder leaves for good: taking a run's lock there stops naming the filesystem, and the job's check says
    so; where flock works, both pass."""
    import errno
    import fcntl

    from gropd.record import run_lock
    from gropd.runs.preflight_env import flock_line

    run = tmp_path / "results" / "tiny" / RUN
    assert flock_line(run.parent / ".locks").status == "ok"
    real = fcntl.flock

    def no_flock(fd, operation):
        if operation & fcntl.LOCK_UN == 0:
            raise OSError(errno.ENOSYS, "Function not implemented")
        return real(fd, operation)

    monkeypatch.setattr(run_lock.fcntl, "flock", no_flock)
    monkeypatch.setattr(run_lock, "_FLOCK_WORKS", set())
    with pytest.raises(ConfigError, match=r"flock\(2\) fails there \(ENOSYS: Function not implemented\)"):
        with hold_run(run):
            pass
    line = flock_line(run.parent / ".locks")
    assert line.status == "FAILED" and "ENOSYS" in line.text and "-o flock" in line.text


def test_rank_0_tells_a_live_shard_from_one_that_ended_on_any_node(tmp_path) -> None:
    """shard_ended, rank 0's question while it waits: a shard holding its lock is alive (None); once its process is
    killed (SIGKILL: nothing recorded) its lock is free and it is gone; a record it released says so; a record older
    than this attempt's rank 0 is an earlier attempt's, not this shard's (None: it may still start)."""
    run = tmp_path / "results" / "tiny" / RUN
    shard = subprocess.Popen(
        [sys.executable, "-c", HOLDER.replace("hold_run(Path(sys.argv[1]))", "hold_run(Path(sys.argv[1]), 'shard1')"),
         str(run)], stdout=subprocess.PIPE, text=True, cwd=REPO,
    )  # fmt: skip
    try:
        assert shard.stdout.readline() == "held\n"
        with hold_run(run):  # rank 0, after its shard
            assert shard_ended(run, 1) is None
            assert shard_ended(run, 2) is None  # never started
            shard.send_signal(signal.SIGKILL)
            shard.wait()
            assert shard_ended(run, 1) == f"pid {shard.pid} on host {socket.gethostname()} is gone: its lock is free"
            holder_path = lock_paths(run, "shard1")[1]
            record = json.loads(holder_path.read_text())
            holder_path.write_text(json.dumps({**record, "released": "2026-12-04T10:00:00"}))
            assert "released its lock at 2026-12-04T10:00:00" in shard_ended(run, 1)
            earlier = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(time.time() - 3600))
            holder_path.write_text(json.dumps({**record, "since": earlier}))
            assert shard_ended(run, 1) is None
    finally:
        shard.kill()
        shard.wait()


def test_a_second_writer_stops_at_once_naming_the_holder_and_a_dead_holders_lock_is_stale(tmp_path, capsys) -> None:
    run = tmp_path / "results" / "tiny" / RUN
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(run)], stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        assert holder.stdout.readline() == "held\n"
        started = time.monotonic()
        with pytest.raises(RunBusyError) as busy, hold_run(run):
            pass
        assert time.monotonic() - started < 1
        assert f"run tiny/{RUN} is being written by pid {holder.pid} on host" in str(busy.value)
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()
    with hold_run(run):  # the kernel dropped the dead holder's lock: taken, with a note
        assert json.loads(lock_paths(run)[1].read_text())["pid"] == os.getpid()
    assert "died holding it" in capsys.readouterr().err
    assert json.loads(lock_paths(run)[1].read_text())["released"]
    assert not run.exists()  # the lock lives beside the run, so --force can delete the run's directory under it


def test_a_waiter_reads_the_record_its_holder_writes_just_after_taking_the_lock(tmp_path: Path) -> None:
    """The holder writes its record right after it takes the lock; a waiter that comes in between found none (or
    the last holder's released one) and named nobody: seen once in a loaded CI run of the two-writers test."""
    import threading

    path = tmp_path / "run.holder.json"
    path.write_text(json.dumps({"pid": 1, "host": "h", "since": "s", "released": "r"}))  # the last holder's
    writer = threading.Timer(0.3, lambda: path.write_text(json.dumps({"pid": 2, "host": "h", "since": "t"})))
    writer.start()
    assert current_holder(path)["pid"] == 2
    writer.join()
    assert current_holder(tmp_path / "none.json", wait_s=0.1) == {}
    assert describe({}) == describe({"pid": 1, "released": "r"}) == "another process (no holder record of it yet)"


WRITER = """
import os, socket, sys, time
from pathlib import Path
from gropd.record.run_dir import RunDir
from gropd.record.run_lock import hold_run
from gropd.runs.session import process_start
run = Path(sys.argv[1])
with hold_run(run):
    owner = {"pid": os.getpid(), "pid_start": process_start(os.getpid()), "host": socket.gethostname()}
    RunDir(run).update_status(status="running", config_hash=sys.argv[2], step=3, **owner)
    print("writing", flush=True)
    time.sleep(60)
"""


@pytest.mark.parametrize("deleted", ["the lock file", "the whole .locks folder"])
def test_deleting_a_held_lock_never_lets_a_second_writer_in(project, capsys, deleted) -> None:
    """A user clearing what look like stale locks while a run trains: the second `run` (with or without --force)
    and `evaluate` still stop, naming the writer, which status.json records (gropd/runs/session.py)."""
    run = project / "results" / "tiny" / RUN
    config = load_run(load_manifests(project / "experiments"), "tiny", RUN)  # what `run` will plan
    RunDir(run).write_config(config_yaml(config))  # the running writer's files: its config, then its status
    command = [sys.executable, "-c", WRITER, str(run), config_hash(config)]
    writer = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        assert writer.stdout.readline() == "writing\n"
        lock, _ = lock_paths(run)
        lock.unlink() if deleted == "the lock file" else shutil.rmtree(lock.parent)
        before = run.joinpath("status.json").read_text()
        for argv in (["run", RUN, "--profile", "tiny"], ["run", RUN, "--profile", "tiny", "--force"]):
            capsys.readouterr()
            assert cli.main(argv) == 2
            assert f"is being written by pid {writer.pid} on this host" in capsys.readouterr().err
        assert cli.main(["evaluate", RUN, "--profile", "tiny"]) == 2
        assert run.joinpath("status.json").read_text() == before
        assert sorted(p.name for p in run.iterdir()) == ["config.yaml", "status.json"]
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait()


@pytest.mark.slow
@pytest.mark.parametrize("deleted", ["lock", "run directory"])
def test_a_writer_whose_lock_or_run_directory_is_deleted_stops_before_its_next_write(
    project, capsys, monkeypatch, deleted
) -> None:
    """The writer itself checks its hold before each step's writes (gropd/record/run_lock.py: require_held): once
    its lock file or its run's directory is deleted mid-run, it stops with one line, exit 2, and writes nothing
    more: no "failed" status (the run is not its own now), no directory made again without its config_hash."""
    from gropd.train import loop

    run = project / "results" / "tiny" / RUN
    after_step = loop.print_progress

    def delete_after_step_1(run_id, record, *args) -> None:
        after_step(run_id, record, *args)
        if record["step"] == 1:
            lock_paths(run)[0].unlink() if deleted == "lock" else shutil.rmtree(run)

    monkeypatch.setattr(loop, "print_progress", delete_after_step_1)
    tiny = ["--profile", "tiny", "train.steps=3", "eval.questions=1", "eval.suites=[add]"]
    assert cli.main(["run", RUN, *tiny]) == 2
    err = capsys.readouterr().err
    assert "stopped without writing more" in err and "Traceback" not in err
    if deleted == "lock":
        assert "its lock file" in err
        status = RunDir(run).read_status()
        assert (status["status"], status["step"], "wall_s" in status) == ("running", 1, False)
        assert [r["step"] for r in RunDir(run).read_metrics()] == [1]
    else:
        assert "was deleted while this process wrote it" in err and not run.exists()


def test_run_and_evaluate_refuse_a_run_another_process_holds(project, capsys) -> None:
    run = project / "results" / "tiny" / RUN
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(run)], stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        assert holder.stdout.readline() == "held\n"
        for argv in (["run", RUN, "--profile", "tiny"], ["run", RUN, "--profile", "tiny", "--force"]):
            assert f"is being written by pid {holder.pid}" in refused(project, argv, capsys)
        assert f"is being written by pid {holder.pid}" in refused(
            project, ["evaluate", RUN, "--profile", "tiny"], capsys
        )
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait()


@pytest.mark.slow
def test_two_runs_of_one_run_started_together(project) -> None:
    """Two `gropd.cli run` of the same run at once: one trains it, the other exits 2 within a second naming the
    holder; the run that finished equals one that ran alone (every logged number but timings)."""
    tiny = ["--profile", "tiny", "train.steps=2", "eval.questions=4", "train.checkpoint_every=1"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    def start(results: str) -> subprocess.Popen:
        argv = [sys.executable, "-m", "gropd.cli", "--results", results, "run", RUN, *tiny]
        return subprocess.Popen(argv, cwd=project, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    first, second = start("results"), start("results")
    started = time.monotonic()
    ended = {}
    while len(ended) < 2:
        for name, process in (("first", first), ("second", second)):
            if name not in ended and process.poll() is not None:
                ended[name] = (time.monotonic() - started, process.returncode, process.communicate()[1])
        time.sleep(0.05)
    (loser_time, loser_code, loser_err), (_, winner_code, _) = sorted(ended.values(), key=lambda e: e[1] == 0)
    assert (winner_code, loser_code) == (0, 2) and loser_time < 30  # the loser's time is mostly Python's start-up
    assert "is being written by pid" in loser_err and "Traceback" not in loser_err
    alone = start("alone")
    assert alone.wait() == 0

    def logged(root: str) -> list[dict]:
        rows = RunDir(project / root / "tiny" / RUN).read_metrics()
        return [{k: v for k, v in row.items() if not k.startswith("time_")} for row in rows]

    assert logged("results") == logged("alone")
    summaries = [
        json.loads((project / r / "tiny" / RUN / "eval" / "summary.json").read_text()) for r in ("results", "alone")
    ]
    assert summaries[0]["macro"] == summaries[1]["macro"]


FAKE_CLI = """
import os, signal, sys, time
from pathlib import Path
log = Path(os.environ["FAKE_LOG"])
signal.signal(signal.SIGTERM, lambda *_: (log.write_text(log.read_text() + "TERM\\n"), sys.exit(143)))
log.write_text(f"{os.getpid()}\\n")
time.sleep(60)
"""


@pytest.mark.parametrize("sent", [signal.SIGTERM, signal.SIGINT])
@pytest.mark.parametrize("window", [False, True], ids=["", "before-child-known"])
def test_reproduce_sh_passes_a_signal_on_to_its_python_and_waits(tmp_path: Path, sent, window) -> None:
    """Before, bash died of SIGTERM and its `gropd.cli grid` went on (two grids on one results/ when the command was
    run again). The Python child here stands in for gropd.cli: it records its pid and the SIGTERM it is sent.
    `window`: the signal comes after the fork but before bash knows the child's pid (widened here by a sleep; on a
    loaded machine it is milliseconds, and a signal there was lost: CI once waited the child's whole minute)."""
    script = copy_with_venv(tmp_path)
    if window:
        text = script.read_text()
        assert "0<&0 & child=$!" in text
        script.write_text(text.replace("0<&0 & child=$!", "0<&0 & sleep 2; child=$!"))
    fake = tmp_path / "fake" / "gropd"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "cli.py").write_text(FAKE_CLI)
    log = tmp_path / "log"
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "fake"), "FAKE_LOG": str(log)}
    # SIGINT as a terminal leaves it (pytest may run as `./reproduce.sh test`'s background child, which bash starts
    # with SIGINT ignored, and a shell cannot trap a signal ignored when it started: bash(1), SIGNALS)
    default_sigint = lambda: signal.signal(signal.SIGINT, signal.SIG_DFL)  # noqa: E731
    shell = subprocess.Popen(
        ["bash", str(script), "status", "--profile", "tiny"], cwd=tmp_path, env=env, preexec_fn=default_sigint
    )
    for _ in range(200):
        if log.exists() and log.read_text().strip():
            break
        time.sleep(0.05)
    child = int(log.read_text().split()[0])
    shell.send_signal(sent)
    assert shell.wait(timeout=20) != 0
    assert log.read_text().split()[1:] == ["TERM"]
    with pytest.raises(ProcessLookupError):
        os.kill(child, 0)


# --- records checked when read ---------------------------------------------------------------------------------------


def cross(root: Path) -> None:
    """Claim 3's cross-pattern runs, three seeds each: vanilla OPD's reward falls (unstable) in every seed, GR-OPD's
    in its seed 2 only, so the claim is "not reproduced" (GR-OPD also unstable in 1 of 3)."""
    write_experiments(root, grids={**ONLY, "table1": table1_grid(P3, P5)})
    for pairing in (P3, P5):
        for method, lasts in (("opd", [0.1, 0.1, 0.1]), ("gropd", [0.3, 0.3, 0.1])):
            for seed, last in enumerate(lasts):
                rows = metric_rows(10, verifier_reward=[0.3] * 9 + [last], mean_response_len=60.0)
                run_id = seeded(f"table1__{pairing}__{method}", seed)
                write_run(root / "results", "tiny", run_id, metrics=rows, eval_summary=macro_summary(20.0 + seed))


def built(root: Path) -> dict[str, str]:
    out = root / "out"
    shutil.rmtree(out, ignore_errors=True)
    written = build(
        ["table1", "claims"],
        profile="tiny",
        results_root=root / "results",
        experiments_dir=root / "experiments",
        out_root=out,
    )
    return {path.name: path.read_text() for path in written if path.suffix == ".md"}


def verdict_of(claims_md: str, key: str) -> str:
    return next(line for line in claims_md.splitlines() if line.startswith(f"| {key}. ")).split(" | ")[1]


DAMAGE = {
    "cut short": lambda run: run.metrics_path.write_text("".join(run.metrics_path.read_text().splitlines(True)[:1])),
    "finished early": lambda run: (  # metrics and status.json cut alike: step 9 of train.steps 10, "finished"
        run.metrics_path.write_text("".join(run.metrics_path.read_text().splitlines(True)[:9])),
        run.update_status(step=9),
    ),
    "repeated steps": lambda run: run.metrics_path.write_text(run.metrics_path.read_text() * 2),
    "out of order": lambda run: run.metrics_path.write_text(
        "".join(reversed(run.metrics_path.read_text().splitlines(True)))
    ),
    "status of another run": lambda run: run.update_status(run_id="table1__other__gropd"),
    "config of another profile": lambda run: run.config_path.write_text(
        run.config_path.read_text().replace("profile: tiny", "profile: paper")
    ),
    "Avg@K above 100": lambda run: suite_set(run, "avg_at_k", 150.0),
    "Avg@K below 0": lambda run: suite_set(run, "avg_at_k", -50.0),
    "pass@k above 100": lambda run: suite_set(run, "pass_at_k", 100.5),
    "K a word": lambda run: suite_set(run, "k", "four"),
    "K zero": lambda run: suite_set(run, "k", 0),
    "J_H outside [0, 1]": lambda run: run.horizon_path.write_text(
        json.dumps({"horizons": [1, 2], "values": [5.0, 5.0], "informative": 1, "prompts": 1})
    ),
    "J_H shorter than its horizons": lambda run: run.horizon_path.write_text(
        json.dumps({"horizons": [1, 2], "values": [0.5], "informative": 1, "prompts": 1})
    ),
}


def suite_set(run: RunDir, key: str, value: object) -> None:
    """Set `key` of every suite of the run's eval/summary.json to `value`."""
    summary = json.loads(run.summary_path.read_text())
    for record in summary["suites"].values():
        record[key] = value
    run.summary_path.write_text(json.dumps(summary))


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_record_is_a_named_missing_run_never_a_number_or_a_verdict(tmp_path, damage) -> None:
    """Cutting GR-OPD seed 2's metrics to one line used to make its reward flat, and claim 3 "reproduced"."""
    cross(tmp_path)
    intact = built(tmp_path)
    assert verdict_of(intact["claims.md"], "3") == "not reproduced"
    run = RunDir(tmp_path / "results" / "tiny" / f"table1__{P3}__gropd__seed2")
    if damage == "config of another profile":  # (the hash check stops an edited config.yaml: this one is re-hashed)
        DAMAGE[damage](run)
        run.update_status(config_hash=__import__("gropd.config", fromlist=["data_hash"]).data_hash(run.read_config()))
    else:
        DAMAGE[damage](run)
    after = built(tmp_path)
    cell = f"- I4think→B1.7: not tested — the record of table1__{P3}__gropd__seed2 is broken (see Missing)"
    assert cell in after["claims.md"].splitlines()
    assert "- I32think→B1.7: not reproduced — GR-OPD (λ=0, γ=0.99) also unstable in 1 of 3 seeds" in after["claims.md"]
    assert f"`table1__{P3}__gropd__seed2`: broken record: " in after["claims.md"]
    assert f"`table1__{P3}__gropd__seed2`: broken record: " in after["table1.md"]
    row = next(line for line in after["table1.md"].splitlines() if "I4think" in line and "GR-OPD" in line)
    assert "n=2" in row or "| 2 |" in row  # two seeds in the cell, not three


def test_runs_copied_under_another_profile_publish_nothing_of_it(tmp_path) -> None:
    cross(tmp_path)
    shutil.copytree(tmp_path / "results" / "tiny", tmp_path / "results" / "paper")
    with pytest.raises(ConfigError, match="no finished run of grid table1"):
        build(
            ["table1"],
            profile="paper",
            results_root=tmp_path / "results",
            experiments_dir=tmp_path / "experiments",
            out_root=tmp_path / "out",
        )


def test_a_claim_comparing_an_unknown_key_or_method_is_an_error(tmp_path) -> None:
    report = yaml.safe_load((REPO / "experiments" / "report.yaml").read_text())
    for selector, message in (({"metod": "opd"}, "'metod' is not a config key"), ({"method": "odp"}, "method 'odp'")):
        report["claims"][1]["compare"] = [{"method": "gropd"}, selector]
        cross(tmp_path) if not (tmp_path / "experiments").exists() else None
        (tmp_path / "experiments" / "report.yaml").write_text(yaml.safe_dump(report, allow_unicode=True))
        with pytest.raises(ConfigError, match=message):
            built(tmp_path)


# --- publishing: the previous set stays whole ------------------------------------------------------------------------


def published(out_dir: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(out_dir.iterdir())}


def test_a_full_disk_while_publishing_leaves_the_previous_set_whole(tmp_path, monkeypatch) -> None:
    """Where root may mount one, a 64 KiB tmpfs fills for real; elsewhere the third file's write fails with ENOSPC."""
    out = tmp_path / "figures"
    out.mkdir()
    mounted = (
        os.geteuid() == 0
        and subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(out)]).returncode == 0
    )
    try:
        swap_in(out / "tiny", {"table1.md": b"old table", "claims.md": b"old claims"})
        before = published(out / "tiny")
        big = {f"fig{i}.png": os.urandom(20_000) for i in range(6)}
        if not mounted:
            module = importlib.import_module("gropd.report.publish")

            real, calls = module.atomic_write_with, []

            def failing(path, write):
                calls.append(path)
                if len(calls) == 3:
                    raise OSError(28, "No space left on device", str(path))
                real(path, write)

            monkeypatch.setattr(module, "atomic_write_with", failing)
        with pytest.raises(OSError) as full:
            swap_in(out / "tiny", {"table1.md": b"new table", **big})
        assert full.value.errno == 28
        assert published(out / "tiny") == before
        assert [p.name for p in out.iterdir() if not p.name.endswith("-publish.lock")] == [
            "tiny",
            os.readlink(out / "tiny"),
        ] or len(list(out.glob(".tiny.*"))) == 1
    finally:
        if mounted:
            subprocess.run(["umount", str(out)])


SLOW_PUBLISH = """
import sys, time
from pathlib import Path
import importlib
publish = importlib.import_module("gropd.report.publish")
real = publish.atomic_write_with
def slow(path, write):
    real(path, write)
    print("wrote", path.name, flush=True)
    time.sleep(0.2)
publish.atomic_write_with = slow
publish.swap_in(Path(sys.argv[1]), {f"file{i}.md": f"new {i}".encode() for i in range(20)})
"""


def test_a_kill_while_publishing_leaves_the_previous_set_whole(tmp_path) -> None:
    """Before, a SIGKILL left 7 files new and 33 old. Killed after its fifth file, the old set is whole; the next
    publish clears what the killed one left."""
    out = tmp_path / "figures" / "tiny"
    swap_in(out, {f"file{i}.md": f"old {i}".encode() for i in range(20)})
    before = published(out)
    writer = subprocess.Popen(
        [sys.executable, "-c", SLOW_PUBLISH, str(out)], stdout=subprocess.PIPE, text=True, cwd=REPO
    )
    for _ in range(5):
        assert writer.stdout.readline().startswith("wrote")
    writer.kill()
    writer.wait()
    assert published(out) == before
    swap_in(out, {"file0.md": b"newer"})
    assert published(out) == {**before, "file0.md": b"newer"}
    assert sorted(p.name for p in out.parent.iterdir() if p.is_dir() and not p.is_symlink()) == [os.readlink(out)]


# --- the front door, by generated inputs ------------------------------------------------------------------------------

VALID = ["gropd.lam=0.5", "train.steps=3", "gropd.gamma=1.0", "sampling.temperature=0.7", "train.optimizer.lr=1e-4"]
INVALID = ["gropd.lam=-1", "train.steps=true", "gropd.gamma=2", "train.steps=abc", "eval.suites=[]", "gropd.lamb=1"]
INVALID += ["eval.first_question=100000", "seed=3", "method=opd", "run_id=../x", "=5", "gropd..lam=1", "gropd={lam: 1"]
SECOND = "table1__I4nothink-I1.7nothink__opd"


def front_door_inputs():
    from hypothesis import strategies as st

    numbers = st.floats(allow_nan=True, allow_infinity=True) | st.integers(-5, 5) | st.booleans()
    generated = st.builds(
        lambda key, value: f"{key}={json.dumps(value)}", st.sampled_from(["gropd.lam", "train.steps"]), numbers
    )
    overrides = st.lists(st.sampled_from(VALID + INVALID) | generated, max_size=3)
    run_file = st.none() | st.fixed_dictionaries(
        {"run_id": st.sampled_from([RUN, "other", ".."]), "gropd": st.fixed_dictionaries({"lam": numbers})}
    ).map(lambda d: yaml.safe_dump({"pairing": "I4nothink-I1.7nothink", "method": "gropd", **d}))
    repeated = st.booleans()  # the run file's gropd.lam given twice
    second = st.sampled_from(["absent", "finished", "edited", "corrupt"])  # a result of the grid's second run
    return st.tuples(overrides, run_file, repeated, second)


def check_front_door(base: Path, tmp_root: Path, monkeypatch: pytest.MonkeyPatch, case: tuple) -> None:
    """One generated case: --dry-run and the real command (its runs recorded, not trained) agree; a refusal is exit 2
    with nothing written anywhere, an acceptance writes only the run files and runs what the dry run listed."""
    import contextlib
    import io
    import tempfile

    from test_front_door import finished

    overrides, run_file, repeated, second = case
    root = Path(tempfile.mkdtemp(dir=tmp_root)) / "repo"
    shutil.copytree(base, root, symlinks=True)
    monkeypatch.chdir(root)
    if second != "absent":
        run_dir = finished(root, SECOND)
        if second == "edited":
            run_dir.config_path.write_text(run_dir.config_path.read_text() + "seed: 9\n")
        if second == "corrupt":
            run_dir.status_path.write_text('{"status": "fini')
    if run_file is not None:
        path = root / "experiments" / "runs" / "tiny" / f"{RUN}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(run_file + ("gropd: {lam: 0.0}\n" if repeated else ""))
    executed: list[str] = []
    monkeypatch.setattr(cli, "execute", lambda config, *a, **k: executed.append(config.run_id) or {})
    argv = ["grid", "table1", "--profile", "tiny", *overrides]
    before, err = snapshot(root.parent), io.StringIO()
    with contextlib.redirect_stderr(err):
        dry = cli.main([*argv, "--dry-run"])
    assert dry in (0, 2) and "Traceback" not in err.getvalue() and changes(before, snapshot(root.parent)) == []
    listed = [line.split(": ")[0].split("] ")[-1] for line in err.getvalue().splitlines() if line.startswith("[")]
    with contextlib.redirect_stderr(io.StringIO()) as real_err:
        real = cli.main(argv)
    assert real == dry, (case, err.getvalue(), real_err.getvalue())
    written = changes(before, snapshot(root.parent))
    if dry == 2:
        assert written == [] and executed == []
    else:
        inside = [path.split("/", 1)[1] for path in written if "/" in path]  # (the first part: the example's folder)
        assert all(path.startswith("repo/experiments/runs") or path == "repo/experiments" for path in inside), written
        assert executed == listed


def test_the_front_door_on_generated_inputs(tmp_path, monkeypatch) -> None:
    from hypothesis import HealthCheck, given, settings

    base = clone(tmp_path / "base") if (tmp_path / "base").mkdir() is None else None

    @settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(front_door_inputs())
    def run(case):
        check_front_door(base, tmp_path, monkeypatch, case)

    run()


@pytest.mark.slow
def test_the_front_door_on_many_generated_inputs(tmp_path, monkeypatch) -> None:
    from hypothesis import HealthCheck, given, settings

    base = clone(tmp_path / "base") if (tmp_path / "base").mkdir() is None else None

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
    @given(front_door_inputs())
    def run(case):
        check_front_door(base, tmp_path, monkeypatch, case)

    run()


@pytest.mark.parametrize("setting", ["backend.dtype=bfloat16", "backend.rollout=vllm"])
def test_a_sampler_that_samples_a_copy_is_refused_before_anything_is_written(project, capsys, setting) -> None:
    """The tiny profile's backend.old_logprobs: sampler needs the trained float32 weights to sample themselves; with
    bf16 compute (or vLLM) the engine samples a copy: refused at the front door, not at step 0 of a written run."""
    for argv in (["run", RUN, "--profile", "tiny", setting], ["grid", "table1", "--profile", "tiny", setting]):
        err = refused(project, argv, capsys)
        assert "backend.old_logprobs" in err and "samples its own copy" in err


@pytest.mark.parametrize("where", ["results/reference", "paper_figures", "paper_figures/tiny"])
def test_nothing_trains_into_the_committed_runs_or_the_published_set(project, capsys, where) -> None:
    """results/reference/ (READ_ONLY in it) holds the runs behind the README; paper_figures/ the published set: `run`
    and `grid` into either are refused before anything is written; a copy of the committed runs without READ_ONLY
    is an ordinary results directory."""
    (project / "results" / "reference").mkdir(exist_ok=True)
    shutil.copy(REPO / "results" / "reference" / "READ_ONLY", project / "results" / "reference" / "READ_ONLY")
    (project / where).mkdir(parents=True, exist_ok=True)
    for argv in (["run", RUN], ["grid", "table1"]):
        err = refused(project, ["--results", where, *argv, "--profile", "tiny"], capsys)
        assert "--results" in err and ("committed runs" in err or "paper_figures/" in err)


def test_a_run_with_other_settings_never_takes_over_the_registered_one(tmp_path) -> None:
    """An extra seed made with other settings (a 1-step smoke run) is its own row, labelled by how it differs from
    the registered setting, and no claim reads it: the claims page is what it was without it."""
    cross(tmp_path)
    before = built(tmp_path)
    extra = seeded(f"table1__{P3}__opd", 3)
    write_run(
        tmp_path / "results",
        "tiny",
        extra,
        metrics=metric_rows(1, verifier_reward=0.9),
        config={"train": {"steps": 1}},
        eval_summary=macro_summary(99.0),
    )
    after = built(tmp_path)
    assert after["claims.md"] == before["claims.md"]
    rows = [line for line in after["table1.md"].splitlines() if "I4think" in line and "vanilla OPD" in line]
    assert len(rows) == 2 and "[not the registered setting: train.steps=1]" in rows[1] and "99.00" in rows[1]
    assert "not the registered" not in rows[0]


def alias_bomb(levels: int = 9) -> str:
    """A "billion laughs" YAML: each anchor a list of nine aliases of the one before (9**levels values)."""
    lines = ["l0: &l0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 9)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


def test_rough_front_door_cases_of_round_2_are_one_line_before_anything(project, capsys, tmp_path) -> None:
    """Each was a traceback, a misleading message or a late refusal: an alias bomb in a run file (32 s and 3.7 GB in
    `status`), the commands typed outside the repository ("'tiny' is not a profile (expected one of )"), --results on
    a dangling link ("File exists"), experiments/runs/tiny a file (--dry-run passed, the run said "File exists"), a
    run directory that is a link elsewhere (--force said "or --force")."""
    run_file = project / "experiments" / "runs" / "tiny" / f"{RUN}.yaml"
    run_file.parent.mkdir(parents=True)
    run_file.write_text(alias_bomb())
    bombed = "more than 100,000 values once its aliases"
    assert bombed in refused(project, ["run", RUN, "--profile", "tiny"], capsys)
    assert cli.main(["status", "--profile", "tiny"]) == 0  # status lists the run as broken, saying why
    assert [line for line in capsys.readouterr().out.splitlines() if bombed in line][0].split()[:2] == [RUN, "broken"]
    run_file.unlink()
    run_file.parent.rmdir()
    (project / "experiments" / "runs" / "tiny").write_text("")
    for argv in (["grid", "table1", "--profile", "tiny", "--dry-run"], ["run", RUN, "--profile", "tiny"]):
        assert "experiments/runs/tiny: <top level>: is not a directory" in refused(project, argv, capsys)
    (project / "experiments" / "runs" / "tiny").unlink()
    (tmp_path / "kept elsewhere").mkdir()
    (project / "results" / "tiny" / RUN).symlink_to(tmp_path / "kept elsewhere")
    for argv in (["run", RUN, "--profile", "tiny"], ["run", RUN, "--profile", "tiny", "--force"]):
        assert f"results/tiny/{RUN}: <top level>: is a symbolic link to" in refused(project, argv, capsys)
    (project / "results" / "tiny" / RUN).unlink()
    (project / "gone").symlink_to(tmp_path / "nowhere")
    err = refused(project, ["--results", "gone", "run", RUN, "--profile", "tiny"], capsys)
    assert "--results: 'gone' is a link to" in err and "which does not exist" in err
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.chdir(elsewhere)
    for argv in (["run", RUN, "--profile", "tiny"], ["status"], ["report", "table1", "--profile", "tiny"]):
        err = refused(project, argv, capsys)
        assert f"working directory: <top level>: {elsewhere} has no experiments/models.yaml" in err
        assert "the repository's root" in err


def test_another_instruction_on_the_tiny_worlds_models_is_refused_before_anything_is_written(project, capsys) -> None:
    """The tiny world's models were trained on tiny_world.yaml's instruction and answer nothing else."""
    err = refused(project, ["run", RUN, "--profile", "tiny", "prompt.instruction=Say it."], capsys)
    assert "prompt.instruction: 'Say it.'" in err and "tiny_world.yaml" in err

"""A run's session in status.json: owner (pid, host), failure record and resume, wall time, liveness."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gropd.record.run_dir import RunDir
from gropd.runs.session import STALE_AFTER_S, is_alive, process_start, run_session, zombie


def run_dir_with(tmp_path: Path, **status) -> RunDir:
    """A run directory whose status.json holds `status` (plus the config hash every status.json has)."""
    run_dir = RunDir(tmp_path / "run")
    run_dir.update_status(config_hash="0123456789abcdef", **status)
    return run_dir


def test_exception_records_failed_with_reason_and_stage(tmp_path: Path) -> None:
    run_dir = run_dir_with(tmp_path, status="running", step=3)
    with pytest.raises(ValueError, match="boom"), run_session(run_dir):
        run_dir.update_status(status="trained")
        raise ValueError("boom")
    status = run_dir.read_status()
    assert (status["status"], status["failed_in"], status["reason"]) == ("failed", "trained", "ValueError: boom")
    assert (status["pid"], status["host"]) == (os.getpid(), socket.gethostname())
    assert status["wall_s"] >= 0


def test_next_session_resumes_where_the_failure_happened(tmp_path: Path) -> None:
    run_dir = run_dir_with(tmp_path, status="failed", failed_in="trained", reason="ValueError: boom", wall_s=10.0)
    with run_session(run_dir) as status:
        assert (status["status"], status["reason"], status["failed_in"]) == ("trained", None, None)
        time.sleep(0.2)
    assert run_dir.read_status()["wall_s"] >= 10.2


def test_keyboard_interrupt_is_not_a_failure(tmp_path: Path) -> None:
    run_dir = run_dir_with(tmp_path, status="running")
    with pytest.raises(KeyboardInterrupt), run_session(run_dir):
        raise KeyboardInterrupt
    assert run_dir.read_status()["status"] == "running"


def dead_pid() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_liveness_rule() -> None:
    here = socket.gethostname()
    me = {"pid": os.getpid(), "host": here, "pid_start": process_start(os.getpid())}
    assert is_alive(me)
    assert not is_alive({**me, "pid": dead_pid(), "pid_start": None})
    if me["pid_start"] is not None:  # Linux: a reused pid (other start time) is not the run's process
        assert not is_alive({**me, "pid_start": str(int(me["pid_start"]) + 1)})
        assert not is_alive({"pid": 1, "host": here})  # pid 1 always exists: without its start time, not the run's
    now = time.time()
    fresh = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(now - 60))
    stale = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(now - STALE_AFTER_S - 60))
    assert is_alive({"pid": 1, "host": here + "-elsewhere", "updated": fresh}, now)
    assert not is_alive({"pid": 1, "host": here + "-elsewhere", "updated": stale}, now)
    assert not is_alive({"status": "running"})


def test_a_process_that_exited_but_is_not_reaped_is_not_alive() -> None:
    """A zombie (exited, its parent not waiting yet) keeps its pid and start time in /proc: it writes nothing, and a
    run it held resumes (the rehearsal's killed rank, which a container's pid 1 need not reap, is one)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    started = process_start(child.pid)
    deadline = time.monotonic() + 30
    while not zombie(child.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    status = {"pid": child.pid, "pid_start": started, "host": socket.gethostname()}
    assert zombie(child.pid) and not is_alive(status)
    child.wait()

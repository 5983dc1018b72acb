"""Each run records what made it (status.json `started`, `code`, the C library in `machines`): the commit of the
checkout gropd was imported from and whether its tree was clean (gropd/record/code.py), the first session's start,
and glibc's version (gropd/numerics.py: libc_version). Expected values come from git and the clock, asked here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from tiny_runs import REPO, project

from gropd import numerics
from gropd.record.code import code_record, package_root, short
from gropd.record.run_dir import RunDir
from gropd.runs.session import record_machine, run_session


def git(root: Path, *args: str) -> str:
    """git's output in `root` (a commit needs no identity configured on this machine)."""
    command = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t", *args]
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """A git checkout with one commit: gropd/__init__.py and results/README.md, tracked."""
    root = tmp_path / "checkout"
    (root / "gropd").mkdir(parents=True)
    (root / "results").mkdir()
    (root / "gropd" / "__init__.py").write_text("")
    (root / "results" / "README.md").write_text("runs\n")
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "one")
    return root


def run_dir_in(root: Path) -> RunDir:
    run_dir = RunDir(root / "tiny" / "run")
    run_dir.update_status(config_hash="0123456789abcdef", status="running")
    return run_dir


def test_a_clean_checkout_records_its_head_and_clean(checkout: Path) -> None:
    assert code_record(checkout) == {"commit": git(checkout, "rev-parse", "HEAD"), "clean": True}


def touch(root: Path, relative: str) -> None:
    (root / relative).parent.mkdir(parents=True, exist_ok=True)
    (root / relative).write_text("")


@pytest.mark.parametrize(
    ("change", "clean"),
    [
        (lambda root: touch(root, "results/tiny/run/status.json"), True),
        (lambda root: touch(root, "results/run.json"), True),
        (lambda root: touch(root, "scratch/tiny/run/status.json"), True),  # the outputs named
        (lambda root: touch(root, "scratch/other.txt"), False),
        (lambda root: touch(root, "gropd/new.py"), False),  # untracked code counts
        (lambda root: (root / "gropd" / "__init__.py").write_text("x = 1\n"), False),
        (lambda root: (root / "results" / "README.md").write_text("edited\n"), False),  # tracked, under results/
        (lambda root: git(root, "mv", "gropd/__init__.py", "gropd/moved.py"), False),
    ],
    ids=[
        "untracked-run-dir",
        "untracked-results",
        "untracked-outputs",
        "untracked-beside-outputs",
        "untracked-code",
        "edited",
        "edited-results",
        "renamed",
    ],
)
def test_clean_means_no_change_but_untracked_outputs(checkout: Path, change, clean: bool) -> None:
    change(checkout)
    record = code_record(checkout, outputs=[checkout / "scratch" / "tiny"])
    assert record == {"commit": git(checkout, "rev-parse", "HEAD"), "clean": clean}
    assert short(record) == git(checkout, "rev-parse", "--short=7", "HEAD") + ("" if clean else "+dirty")


def test_no_checkout_no_root_or_no_git_records_null_and_why(tmp_path: Path, checkout: Path, monkeypatch) -> None:
    bare = tmp_path / "copied"
    bare.mkdir()
    nowhere = code_record(bare)
    assert (nowhere["commit"], nowhere["clean"]) == (None, None) and "not a git repository" in nowhere["why"]
    inside = code_record(checkout / "gropd")  # e.g. gropd installed into a virtualenv inside a checkout
    assert (inside["commit"], inside["clean"]) == (None, None)
    assert inside["why"] == f"the code at {checkout / 'gropd'} is not a git checkout's root (it lies inside {checkout})"
    monkeypatch.setenv("PATH", str(bare))
    assert code_record(checkout) == {"commit": None, "clean": None, "why": "no git executable on PATH"}
    assert short(code_record(checkout)) == "unknown (no git executable on PATH)"
    assert short(None) == short("f1dcf81") == "not recorded"


def test_a_run_outside_the_checkout_records_the_code_s_commit_and_its_start(tmp_path: Path) -> None:
    """A scratch results directory outside the repository: the commit is that of the checkout gropd came from."""
    run_dir = run_dir_in(tmp_path / "scratch")
    before = datetime.now(UTC).replace(microsecond=0)
    with run_session(run_dir):
        pass
    after = datetime.now(UTC)
    status = run_dir.read_status()
    head = git(package_root(), "rev-parse", "HEAD")
    assert [c["commit"] for c in status["code"]] == [head] and isinstance(status["code"][0]["clean"], bool)
    started = datetime.fromisoformat(status["started"])
    assert started.utcoffset() == timedelta(0) and before <= started <= after
    assert status["started"].endswith("+00:00")


def test_a_resumed_run_keeps_its_start_and_lists_each_commit_once(tmp_path: Path) -> None:
    run_dir = run_dir_in(tmp_path)
    other = {"commit": "0" * 40, "clean": True}
    run_dir.update_status(started="2026-01-02T03:04:05+00:00", code=[other])
    for _ in range(2):
        with run_session(run_dir):
            pass
    status = run_dir.read_status()
    assert status["started"] == "2026-01-02T03:04:05+00:00"
    assert [c["commit"] for c in status["code"]] == ["0" * 40, git(package_root(), "rev-parse", "HEAD")]


def test_the_machine_record_names_the_c_library(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(os, "confstr", lambda name: "glibc 9.87" if name == "CS_GNU_LIBC_VERSION" else None)
    assert numerics.machine_record("native", 1)["libc"] == "glibc 9.87"

    def not_glibc(name: str) -> str:
        raise ValueError("unrecognized configuration name")

    monkeypatch.setattr(os, "confstr", not_glibc)
    monkeypatch.setattr(numerics.platform, "libc_ver", lambda: ("musl", "1.2.5"))
    assert numerics.libc_version() == "musl 1.2.5"
    monkeypatch.setattr(numerics.platform, "libc_ver", lambda: ("", ""))
    assert numerics.libc_version() is None


def test_a_run_resumed_under_another_c_library_lists_both_machines(tmp_path: Path, monkeypatch) -> None:
    run_dir = run_dir_in(tmp_path)
    monkeypatch.setattr(os, "confstr", lambda name: "glibc 2.31")
    status = record_machine(run_dir, run_dir.read_status(), "native", 1)
    monkeypatch.setattr(os, "confstr", lambda name: "glibc 2.36")
    status = record_machine(run_dir, status, "native", 1)
    status = record_machine(run_dir, status, "native", 1)
    assert [m["libc"] for m in run_dir.read_status()["machines"]] == ["glibc 2.31", "glibc 2.36"]


@pytest.mark.slow
def test_a_real_run_in_a_project_outside_the_checkout_records_what_made_it(tmp_path: Path) -> None:
    """`gropd.cli run` of a tiny eval run, its results under tmp_path, gropd from this checkout (PYTHONPATH)."""
    root = project(tmp_path)
    run_id = "table6__I4-nothink"
    command = [sys.executable, "-m", "gropd.cli", "run", run_id, "--profile", "tiny", "eval.questions=2"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    before = datetime.now(UTC).replace(microsecond=0)
    subprocess.run(command, cwd=root, env=env, check=True, capture_output=True)
    status = json.loads((root / "results" / "tiny" / run_id / "status.json").read_text())
    assert status["status"] == "finished"
    assert [c["commit"] for c in status["code"]] == [git(REPO, "rev-parse", "HEAD")]
    assert before <= datetime.fromisoformat(status["started"]) <= datetime.now(UTC)
    assert [m["libc"] for m in status["machines"]] == [os.confstr("CS_GNU_LIBC_VERSION")]

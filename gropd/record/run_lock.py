"""One writer per run directory: a lock held for as long as a process may write into results/<profile>/<run_id>/.

    results/<profile>/.locks/<run_id>.lock          the lock (filelock.FileLock: an flock(2) on this file)
    results/<profile>/.locks/<run_id>.holder.json   who holds it: pid, host, command, since (and when released)

A process takes the lock before it reads the run's state to act on it and before its first byte, and keeps it to
the end (gropd/runs/pipeline.py: `run` as a whole; `evaluate`'s shard 0, and each other shard its own
`<run_id>.shard<r>.lock`). A second writer stops at once with RunBusyError (exit 2) naming the holder. Launched as
several ranks, the run's rank 0 holds it (the others write nothing; a launcher whose rank 0 stops ends them).

A process holding the lock may start a child it waits for to write under its hold (a one-process run's evaluation,
gropd/runs/pipeline.py): the child's environment names the holder (child_env), and the child, whose parent is
that holder and holds the lock now, goes on without taking it.

A lock left by a dead process is stale by construction: the kernel drops an flock when its holder's file is
closed, which a process's death does; the holder record it leaves unreleased is then only overwritten (with a
note). On a shared filesystem this relies on flock across nodes (NFSv4, Lustre with `-o flock`, GPFS); a filesystem
without flock (where filelock would fall back to a soft lock file of its own) is refused (require_flock). Lock files
are never deleted: a waiter and a holder must meet on the same inode.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from fileio import atomic_write_json
from gropd.config.errors import ConfigError

LOCKS = ".locks"
TIME_FORMAT = "%Y-%m-%dT%H:%M:%S"  # a holder record's `since` and `released` (local time)
SAME_ATTEMPT_S = 30.0  # a shard whose lock was taken this long before its rank 0's, or later, is this attempt's
HELD_BY_PARENT = "GROPD_RUN_LOCK_HOLDER"  # "<holder pid>:<lock file>" in a child its holder waits for


class RunBusyError(ConfigError):
    """Another process holds the run's lock: the message names the run and the holder."""


class RunLostError(ConfigError):
    """The run this process holds was taken from under it (its lock file or its directory deleted): it stops
    writing at once, and records nothing more."""


_HELD: dict[Path, int] = {}  # lock file -> its inode when this process took it (hold_run)


def lock_paths(run_root: Path, role: str = "") -> tuple[Path, Path]:
    """(lock file, holder record) of the run at `run_root` for `role` ("" for the run's writer, "shard<r>")."""
    name = run_root.name + (f".{role}" if role else "")
    return run_root.parent / LOCKS / f"{name}.lock", run_root.parent / LOCKS / f"{name}.holder.json"


def read_holder(path: Path) -> dict[str, Any]:
    """The holder record, {} when absent or unreadable (it is only ever informative)."""
    try:
        holder = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return holder if isinstance(holder, dict) else {}


def current_holder(holder_path: Path, wait_s: float = 2.0) -> dict[str, Any]:
    """The record of the process that holds the lock now. It writes it right after taking the lock, so a waiter
    that finds none, or its predecessor's released one, reads again for up to `wait_s` seconds."""
    deadline = time.monotonic() + wait_s
    while True:
        holder = read_holder(holder_path)
        if (holder and not holder.get("released")) or time.monotonic() >= deadline:
            return holder
        time.sleep(0.05)


def describe(holder: dict[str, Any]) -> str:
    if not holder or holder.get("released"):
        return "another process (no holder record of it yet)"
    command = f" ({holder['command']})" if holder.get("command") else ""
    return f"pid {holder.get('pid')} on host {holder.get('host')} since {holder.get('since')}{command}"


def child_env(run_root: Path) -> dict[str, str]:
    """The environment entry that lets a child this (holding) process waits for write the run under its hold."""
    return {HELD_BY_PARENT: f"{os.getpid()}:{os.path.realpath(lock_paths(run_root)[0])}"}


def held_by_parent(run_root: Path, role: str = "") -> bool:
    """Whether this process runs under its parent's hold of the lock: named by child_env, and the holder record
    says the parent holds it now."""
    lock_path, holder_path = lock_paths(run_root, role)
    if os.environ.get(HELD_BY_PARENT) != f"{os.getppid()}:{os.path.realpath(lock_path)}":
        return False
    holder = read_holder(holder_path)
    return (
        holder.get("pid") == os.getppid() and holder.get("host") == socket.gethostname() and not holder.get("released")
    )


_FLOCK_WORKS: set[Path] = set()  # lock directories whose filesystem this process has seen grant an flock


def flock_problem(directory: Path) -> str | None:
    """Why flock(2) does not work on the filesystem of `directory` (made if absent), None when it does: a probe
    file there is locked and unlocked. Without flock filelock falls back, silently, to a soft lock file that a
    killed holder leaves behind for good (Lustre mounted without -o flock)."""
    directory.mkdir(parents=True, exist_ok=True)
    fd = os.open(directory / ".flock-probe", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
    except BlockingIOError:
        pass  # another process probing now: flock works
    except OSError as err:
        return f"flock(2) fails there ({errno.errorcode.get(err.errno, err.errno)}: {err.strerror})"
    finally:
        os.close(fd)
    return None


def require_flock(directory: Path) -> None:
    """ConfigError naming the filesystem's missing flock (flock_problem); checked once per directory a process."""
    if directory in _FLOCK_WORKS:
        return
    if problem := flock_problem(directory):
        raise ConfigError(
            str(directory),
            "--results",
            f"{problem}: a run's lock would be a soft lock file that a killed job leaves for good",
            "results on a filesystem with flock: a local disk, NFSv4, Lustre mounted with -o flock, GPFS",
        )
    _FLOCK_WORKS.add(directory)


def taken(run_root: Path, role: str = "") -> FileLock:
    """The run's lock, acquired (the caller releases it); RunBusyError at once when another process holds it."""
    lock_path, holder_path = lock_paths(run_root, role)
    require_flock(lock_path.parent)
    lock = FileLock(lock_path, timeout=0)
    try:
        lock.acquire()
    except Timeout:
        raise busy_error(run_root, role) from None
    return lock


def busy_error(run_root: Path, role: str = "") -> RunBusyError:
    """The refusal of a run whose lock another process holds, naming that process (its holder record)."""
    run = f"{run_root.parent.name}/{run_root.name}" + (f" ({role})" if role else "")
    return RunBusyError(
        str(run_root),
        "run",
        f"run {run} is being written by {describe(current_holder(lock_paths(run_root, role)[1]))}",
        "one writer per run: wait for it to end (`./reproduce.sh status` shows it), or stop that process "
        "first; a lock is released when its process ends, however it ends",
    )


def check_free(run_root: Path) -> None:
    """RunBusyError when another process holds the run's lock now; writes nothing, so it also answers on a
    read-only results directory (`grid --dry-run`): a command's check before its first byte, the lock itself
    taken by hold_run (where the writing starts, and flock is required of the filesystem: require_flock)."""
    lock_path = lock_paths(run_root)[0]
    if lock_path.exists() and not held_by_parent(run_root) and held_now(lock_path):
        raise busy_error(run_root)


def held_now(lock_path: Path) -> bool:
    """Whether a process holds its flock on `lock_path` now, found without writing: the file opened read-only and
    locked and unlocked at once (flock needs no write access). False when it cannot be opened or locked at all."""
    try:
        fd = os.open(lock_path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
    except BlockingIOError:
        return True
    except OSError:  # no flock on this filesystem: hold_run refuses it (require_flock)
        return False
    finally:
        os.close(fd)
    return False


@contextmanager
def hold_run(run_root: Path, role: str = "", held: bool = True) -> Iterator[None]:
    """Hold the lock of the run at `run_root` (as `role`) for the block; `held` False: a no-op (a rank that does
    not write). RunBusyError at once when another process holds it."""
    if not held or held_by_parent(run_root, role):
        yield
        return
    lock_path, holder_path = lock_paths(run_root, role)
    lock = taken(run_root, role)
    _HELD[lock_path] = os.stat(lock_path).st_ino
    try:
        previous = read_holder(holder_path)
        if previous and not previous.get("released"):
            print(f"note: {lock_path}: its last holder, {describe(previous)}, died holding it", file=sys.stderr)
        since = time.strftime(TIME_FORMAT)
        record = {"pid": os.getpid(), "host": socket.gethostname(), "since": since, "command": " ".join(sys.argv)}
        atomic_write_json(holder_path, record)
        try:
            yield
        finally:  # released on purpose, whatever ended the block (a process that dies records nothing)
            if _still_ours(lock_path):
                atomic_write_json(holder_path, {**record, "released": time.strftime(TIME_FORMAT)})
    finally:
        _HELD.pop(lock_path, None)
        lock.release()


def _still_ours(lock_path: Path) -> bool:
    try:
        return os.stat(lock_path).st_ino == _HELD.get(lock_path)
    except FileNotFoundError:
        return False


def require_held(run_root: Path) -> None:
    """RunLostError unless the run's writer lock this process took (hold_run) is still the file at its path and
    the run's directory is still there. A lock file deleted (or deleted and made again: another writer's) leaves
    this process's flock on a file nobody else meets, and a deleted directory would be recreated half: the writer
    checks before each step's writes and stops. A process that holds no lock (a rank that does not write, a
    child under its parent's hold) passes."""
    lock_path, _ = lock_paths(run_root)
    if lock_path not in _HELD:
        return
    if not run_root.is_dir():
        problem = f"{run_root} was deleted while this process wrote it"
    elif not _still_ours(lock_path):
        problem = f"its lock file {lock_path} was deleted (or replaced) while this process held it"
    else:
        return
    raise RunLostError(
        str(run_root),
        "run",
        f"{problem}: stopped without writing more, since another writer could now start beside it",
        "one writer per run: never delete files under .locks/ or a run's directory while it runs; the run resumes "
        "from its last checkpoint (or start it again with --force)",
    )


def shard_ended(run_root: Path, rank: int) -> str | None:
    """Why evaluation shard `rank` of the run at `run_root`, started with this attempt's rank 0 (its holder record
    at most SAME_ATTEMPT_S older than the run's own), no longer holds its lock, or None while it holds it or has
    not taken it yet: its record says released, or its lock is free (an flock dies with its process, on any node
    of a filesystem with flock)."""
    lock_path, holder_path = lock_paths(run_root, f"shard{rank}")
    holder, rank0 = read_holder(holder_path), read_holder(lock_paths(run_root)[1])
    try:
        began, reference = (time.mktime(time.strptime(r["since"], TIME_FORMAT)) for r in (holder, rank0))
    except (KeyError, TypeError, ValueError):
        return None
    if began < reference - SAME_ATTEMPT_S:
        return None  # an earlier attempt's record: this attempt's shard has not started yet
    who = f"pid {holder.get('pid')} on host {holder.get('host')}"
    if holder.get("released"):
        return f"{who} released its lock at {holder['released']}"
    probe = FileLock(lock_path, timeout=0)
    try:
        probe.acquire()
    except Timeout:
        return None
    probe.release()
    return f"{who} is gone: its lock is free"

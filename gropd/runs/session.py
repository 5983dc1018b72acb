"""One session of a run (a process working on it) as recorded in status.json: who, for how long, and
how it ended.

Liveness, how `status` tells *running* from *resumable*: a session records `pid` and `host`
(and, on Linux, the process's start time, so a reused pid is not mistaken for it) when it
starts, and the training loop refreshes `updated` every step. A run that is not done is
running when that process is alive: on the same host, the pid exists, is not a zombie and, on
Linux, started when status.json says (a record without that time proves nothing); on another host
(results/ on a shared filesystem), status.json was updated less than STALE_AFTER_S ago and no more than
CLOCK_SKEW_S ahead of this host's clock (`updated` is UTC with its offset, so the reader's zone does not matter:
gropd/record/run_dir.py, updated_timestamp; a time in the future is no sign of life).
Otherwise nobody is working on it and it is resumable.

Failure: an exception in a session sets `status: failed`, `reason: "<Type>: message"` and
`failed_in` (the status it failed in: running = training, trained = evaluating); the next
session puts `failed_in` back and resumes from the last checkpoint. Ctrl-C or a kill is not a
failure: the run stays resumable.

Wall time: `wall_s` sums the sessions that ended (done, failed or interrupted); a session
killed with SIGKILL adds nothing.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gropd.config.errors import RunFileError
from gropd.config.schema import BackendSettings
from gropd.record.code import code_record
from gropd.record.run_dir import MAX_PID, RunDir, updated_timestamp
from gropd.record.run_lock import RunBusyError, RunLostError, held_by_parent

STALE_AFTER_S = 30 * 60
CLOCK_SKEW_S = 5 * 60  # how far another host's clock may run ahead: an `updated` later than that (2099) is stale


@dataclass(frozen=True)
class Ranks:
    """The processes of one run as a launcher started them (RANK, WORLD_SIZE): rank 0 writes the run's
    files; `meet()` is a barrier of all of them (nothing with one process)."""

    rank: int
    world: int
    device: str
    collective_s: float | None = None  # the run's planned collective timeout (gropd/runs/job_plan.py), if any

    @staticmethod
    def of(config: Any, collective_s: float | None = None) -> Ranks:
        """This process's rank and world, from the launcher's environment (accelerate launch, torchrun)."""
        device = config.backend.device
        if device == "auto":  # torch only to look: a run on a named device is planned without it
            import torch

            device = "cuda" if torch.cuda.is_available() else "cpu"
        return Ranks(int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1")), device, collective_s)

    @property
    def main(self) -> bool:
        return self.rank == 0

    def meet(self) -> None:
        """Wait until every rank is here. The process group is accelerate's own (PartialState: the one the
        run's Accelerator then uses), made with the run's device so gloo serves a CPU run, and with the
        trainer's collective timeout (gropd/train/world.py): the first PartialState creates the group."""
        if self.world == 1:
            return
        from accelerate import PartialState

        from gropd.train.world import process_group_timeout

        PartialState(cpu=self.device == "cpu", timeout=process_group_timeout(self.collective_s)).wait_for_everyone()


@contextmanager
def run_session(run_dir: RunDir, main: bool = True, backend: BackendSettings | None = None) -> Iterator[dict[str, Any]]:
    """Record this process as the run's owner; yields the status to go on from (a failed run's
    `failed_in` restored); records a failure or the session's wall time when the block ends. Only the
    `main` process (rank 0, or a run's one process) writes. The run's first session records its start
    (`started`), each session the code it runs (record_code); given the run's `backend` settings, the machine
    this session computes on is added to `machines` (gropd/numerics.py: machine_record) unless recorded."""
    status = run_dir.read_status() or {}
    if main and status.get("status") == "failed":
        status = run_dir.update_status(status=status.get("failed_in") or "running", reason=None, failed_in=None)
    if main:
        pid = os.getpid()
        status = run_dir.update_status(pid=pid, pid_start=process_start(pid), host=socket.gethostname())
        if not status.get("started"):
            status = run_dir.update_status(started=datetime.now(UTC).isoformat(timespec="seconds"))
        status = record_code(run_dir, status)
        if backend is not None:
            status = record_machine(run_dir, status, backend.numerics, backend.threads)
    started, lost = time.monotonic(), False
    try:
        yield status
    except RunLostError:  # the run is no longer this session's to write (gropd/record/run_lock.py)
        lost = True
        raise
    except Exception as err:
        if main:
            now = run_dir.read_status() or {}
            run_dir.update_status(status="failed", failed_in=now.get("status"), reason=f"{type(err).__name__}: {err}")
        raise
    finally:
        if main and not lost:
            wall = (run_dir.read_status() or {}).get("wall_s") or 0.0
            run_dir.update_status(wall_s=round(wall + time.monotonic() - started, 1))


def record_code(run_dir: RunDir, status: dict[str, Any]) -> dict[str, Any]:
    """status.json with the code this process runs in `code` (gropd/record/code.py: code_record; each distinct
    record once, in the order first run: a run resumed from another commit lists both). Untracked files under
    the run's profile directory (this run's outputs, its lock) do not make the tree unclean."""
    codes = status.get("code") if isinstance(status.get("code"), list) else []
    record = code_record(outputs=[run_dir.root.parent])
    return status if record in codes else run_dir.update_status(code=[*codes, record])


def record_machine(run_dir: RunDir, status: dict[str, Any], numerics: str, threads: int | None) -> dict[str, Any]:
    """status.json with this process's machine record in `machines` (each distinct record once: a run that
    resumed on another CPU, or under other libraries, lists both)."""
    from gropd.numerics import machine_record

    machines = status.get("machines") if isinstance(status.get("machines"), list) else []
    record = machine_record(numerics, threads)
    return status if record in machines else run_dir.update_status(machines=[*machines, record])


def refuse_live_owner(run_dir: RunDir) -> None:
    """RunBusyError when status.json names a session on this host, other than this process, that is still alive
    and still at the run (running or trained):
    its writer holds the run although this process could take the lock, so the lock file was deleted under it
    (`rm results/<profile>/.locks/...`). Checked by a new writer once it holds the lock, before it reads the run
    to act on it; a child its holder waits for (held_by_parent) is that session's own. Another host's session is
    left to the lock: its liveness there is only a guess (STALE_AFTER_S)."""
    try:
        status = run_dir.read_status() or {}
    except RunFileError:  # a broken status.json names nobody (--force redoes such a run)
        return
    pid = status.get("pid")
    if held_by_parent(run_dir.root) or pid == os.getpid() or status.get("host") != socket.gethostname():
        return
    if status.get("status") in ("running", "trained") and is_alive(status):  # (a finished run's writer moved on)
        raise RunBusyError(
            str(run_dir.status_path),
            "run",
            f"run {run_dir.root.parent.name}/{run_dir.root.name} is being written by pid {pid} on this host "
            "(its status.json), although its lock was free: the lock file was deleted while that process ran",
            "one writer per run: wait for that process to end, or stop it first; never delete files under .locks/",
        )


def is_alive(status: dict[str, Any], now: float | None = None) -> bool:
    """Whether the session recorded in `status` is still working on the run (rule in the module docstring)."""
    pid, host = status.get("pid"), status.get("host")
    if not isinstance(pid, int) or not 0 < pid <= MAX_PID or not isinstance(host, str):
        return False  # (kill(0) and kill(-1) signal groups of processes: they prove nothing about a run)
    if host == socket.gethostname():
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        recorded, current = status.get("pid_start"), process_start(pid)
        return not zombie(pid) and (current is None or recorded == current)
    updated = updated_timestamp(status.get("updated"))
    return updated is not None and -CLOCK_SKEW_S <= (now or time.time()) - updated < STALE_AFTER_S


def zombie(pid: int) -> bool:
    """Whether the process has exited and waits only to be reaped (/proc/<pid>/stat state Z or X; False off Linux):
    a killed rank whose parent died stays one where nothing reaps it (a container's pid 1 need not)."""
    fields = _stat_fields(pid)
    return bool(fields) and fields[0] in ("Z", "X")


def process_start(pid: int) -> str | None:
    """The process's start time in clock ticks since boot (/proc/<pid>/stat field 22), None off Linux."""
    fields = _stat_fields(pid)
    return fields[19] if len(fields) > 19 else None


def _stat_fields(pid: int) -> list[str]:
    """/proc/<pid>/stat's fields after the command name (field 3, the state, first); [] off Linux or once gone."""
    try:
        return (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return []

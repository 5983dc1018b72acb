"""How much memory this process's cgroup may hold: what Slurm's task/cgroup plugin sets to a job's --mem
(ConstrainRAMSpace=yes in cgroup.conf), read as the kernel writes it (the job's check, gropd/runs/preflight_env.py)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
NO_LIMIT = 2**60  # cgroup v1 reports "no limit" as the page counter's maximum (~2^63, rounded to pages)


def memory_limit(proc_cgroup: str, root: Path = ROOT) -> int | None:
    """Bytes this process's cgroup may hold, the least limit of its cgroup and their parents (`proc_cgroup`: the
    text of /proc/self/cgroup): cgroup v2's memory.max under root/<path> of the line `0::<path>` (Documentation/
    admin-guide/cgroup-v2.rst; "max": none), else cgroup v1's memory.limit_in_bytes under root/memory/<path> of the
    line `N:memory:<path>`; None where none is set. Slurm's task/cgroup sets it to the job's --mem
    (ConstrainRAMSpace=yes, cgroup.conf)."""
    for line in proc_cgroup.splitlines():
        number, controllers, path = line.split(":", 2)
        if number == "0" and controllers == "":
            base, name = root, "memory.max"
        elif "memory" in controllers.split(","):
            base, name = root / "memory", "memory.limit_in_bytes"
        else:
            continue
        folder, files = base / path.lstrip("/"), []
        while True:
            files += [folder / name] if (folder / name).is_file() else []
            if folder == base or base not in folder.parents:
                break
            folder = folder.parent
        if files:  # the memory controller is here (a hybrid host lists "0::" too, its memory on v1)
            texts = [file.read_text().strip() for file in files]
            limits = [int(text) for text in texts if text.isdigit() and int(text) < NO_LIMIT]
            return min(limits) if limits else None
    return None


def read_proc_cgroup() -> str:
    """/proc/self/cgroup's text ("" where there is none: not Linux)."""
    try:
        return Path("/proc/self/cgroup").read_text()
    except OSError:
        return ""

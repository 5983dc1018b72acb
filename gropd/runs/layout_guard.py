"""Where runs may be written, decided before the first byte: the results directory (links followed) and the run id.

A results directory is refused for writing when it is empty, the repository's root, inside the tiny world
(results/tiny/world/) or inside a committed set (a READ_ONLY file in it or in a folder above it: results/reference/).
A run id is refused when it would land on a name the results layout gives something else (the tiny world, the
locks, a profile's folder, another run's lock or twin staging) or make a name longer than the filesystem allows.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from gropd.config import ConfigError
from gropd.record.run_lock import LOCKS
from gropd.tiny.recipe import WORLD_ROOT

READ_ONLY = "READ_ONLY"  # a results directory holding this file is read, never trained into (results/reference/)
NAME_MAX = 255  # bytes of one path component where the filesystem does not say (ext4, xfs, btrfs, tmpfs)
# the longest names a run id makes (gropd/record/run_lock.py's lock and holder files for a shard, written by
# fileio.atomic_write_with as ".<name>.<8 random>.tmp"; lifecycle's twin staging; the run file's temp file)
DERIVED = ("{id}.twin-tmp", ".{id}.shard99999.holder.json.XXXXXXXX.tmp", ".{id}.yaml.XXXXXXXX.tmp")
TAKEN = re.compile(r".*(\.twin-tmp|\.shard\d+)$")  # another run's staging folder or shard lock


def _holder_of_read_only(path: Path) -> Path | None:
    """The folder at or above `path` that holds a READ_ONLY file (None: none does)."""
    return next((p for p in (path, *path.parents) if (p / READ_ONLY).is_file()), None)


def require_results_location(results: Path, profile: str) -> None:
    """ConfigError (exit 2, nothing written) unless runs of `profile` may be written under `results`: it does not
    start with a `~` no shell expanded (`--results '~/x'`), and neither it nor results/<profile> resolves (links
    followed) to the filesystem's root, the repository's root (the working directory), into experiments/, into the
    tiny world, or into a committed set or any folder of one."""
    root, world = Path.cwd().resolve(), WORLD_ROOT.resolve()
    if results.parts and results.parts[0].startswith("~"):
        problem = (
            f"{str(results)!r} starts with a '~' no shell expanded: it would make a folder named {results.parts[0]!r}"
        )
        raise ConfigError("command line", "--results", problem, "the path written out (e.g. $HOME/..., unquoted ~/...)")
    for path in (results, results / profile):
        target = path.resolve()
        if target == Path(target.anchor):
            problem = f"{str(path)!r} is the filesystem's root: runs would be written among the system's folders"
        elif target == root / "experiments" or root / "experiments" in target.parents:
            problem = (
                f"{str(path)!r} resolves to {target}, inside experiments/: its YAML files are the project's settings"
            )
        elif target == root:
            problem = f"{str(path)!r} is the repository's root: runs would be written among its files"
        elif target == world or world in target.parents:
            problem = f"{str(path)!r} resolves to {target}, inside the tiny world ({WORLD_ROOT}): its models live there"
        elif holder := _holder_of_read_only(target):
            problem = (
                f"{str(path)!r} resolves to {target}, inside the committed runs of {holder} ({holder / READ_ONLY}): "
                "reports read them, nothing trains into them"
            )
        else:
            continue
        raise ConfigError("command line", "--results", problem, "another results directory (default: results/)")


def name_max(results_root: Path) -> int:
    """The longest file name the filesystem of `results_root` (or of its nearest existing folder) takes."""
    existing = next((p for p in (results_root.absolute(), *results_root.absolute().parents) if p.exists()), None)
    try:
        return os.pathconf(existing or "/", "PC_NAME_MAX")
    except (OSError, ValueError, AttributeError):
        return NAME_MAX


def check_run_id(run_id: str, profiles: list[str], results_root: Path, where: str) -> None:
    """ConfigError naming `where` (the file or layer that set it) when `run_id` collides with the results layout
    (results/<profile>/<run_id>/ beside the tiny world, the locks and other runs' names) or would make a name
    longer than the filesystem takes (DERIVED)."""
    reserved = {WORLD_ROOT.name: f"the tiny world's folder ({WORLD_ROOT})", LOCKS: "the runs' lock folder"}
    reserved |= {profile: "a profile's name (results/<profile>/ holds its runs)" for profile in profiles}
    limit = name_max(results_root)
    overhead = max(len(name.format(id="")) for name in DERIVED)
    problem = None
    if run_id in reserved:
        problem = f"{run_id!r} is {reserved[run_id]}"
    elif TAKEN.match(run_id):
        problem = f"{run_id!r} ends as another run's staging folder or shard lock is named (.twin-tmp, .shard<N>)"
    else:
        longest = len(run_id.encode()) + overhead
        if longest > limit:
            problem = (
                f"{len(run_id.encode())} bytes: its files' names would be {longest} bytes, beyond the {limit} "
                "its filesystem takes"
            )
    if problem:
        raise ConfigError(where, "run_id", problem, f"another run id (at most {limit - overhead} bytes)")

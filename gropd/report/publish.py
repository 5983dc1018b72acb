"""Publishing: every artefact of a build is made in memory first, then the whole set is written beside the
published one and swapped in by one rename, so a failure at any point (a broken run file, an artefact without
results, a full disk, a kill) leaves the previous set whole. Each artefact gets a `<name>.provenance.json`
sidecar: the results directory, the runs read (id, state, config hash), the manifests' digests, the settings,
the files and the same Missing lines the artefact shows.

    paper_figures/<profile>            a symbolic link to the published set, replaced atomically (rename(2))
    paper_figures/.<profile>.<random>/  a set: the previous set's files, this build's written over them

A set holds the artefacts of one results directory: a build from another leaves out the previous set's artefacts
that their sidecars say another directory built (and says so). A set is staged in full (each file written and
synced), then the link is renamed over the old one; the old set and any set a killed build left behind are removed
afterwards. A `<profile>` that is still a plain directory (made before sets existed) is moved into a set once,
first; a link whose set was removed (by hand) is replaced by a set of this build's files alone."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from filelock import FileLock

from fileio import FILE_MODE, atomic_write_with
from gropd.config.errors import ConfigError
from gropd.record.run_dir import DONE
from gropd.report.evidence import Evidence, Run, project_path

RECORDED = ("config_hash", "updated")  # what the sidecar records of each run's status.json
PUBLISH_WAIT_S = 600  # a second build of the same set waits this long for the first to publish


@dataclass
class Artefact:
    """What one builder made: files (name -> text or bytes), the runs it read, its Missing lines, the
    manifests (paths under experiments/), the grids it needs a finished run of (none: manifests only) and
    what its files render (a Table, a Drawing, the Claims), which the index page renders too."""

    name: str
    files: dict[str, str | bytes]
    runs: list[Run] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    manifests: list[str] = field(default_factory=list)
    grids: tuple[str, ...] = ()
    content: object = None


def require_results(ev: Evidence, artefact: Artefact) -> None:
    """ConfigError (exit 2) when none of the artefact's grids has a finished or collapsed run: an empty
    table never replaces a built one."""
    if not artefact.grids or any(run.state in DONE for grid in artefact.grids for run in ev.runs(grid)):
        return
    root, target = ev.results_root, "all" if artefact.name == "claims" else artefact.name
    where = root / ev.profile
    problem = f"no finished run of grid {', '.join(artefact.grids)} in {where}"
    problem = f"{root} is a file" if root.is_file() else f"{where} does not exist" if not where.is_dir() else problem
    expected = f"finished runs: run `./reproduce.sh {target} --profile {ev.profile}`, or read the committed tiny runs "
    raise ConfigError(
        str(root if root.is_file() else where),
        "--results",
        f"{problem}: {artefact.name} has nothing to show; nothing was written",
        expected + "with `--results results/reference` (`./reproduce.sh report` does when you have none)",
    )


def provenance(ev: Evidence, artefact: Artefact) -> str:
    """The sidecar's JSON text."""

    paths = [ev.experiments_dir / name for name in artefact.manifests]
    runs = {run.run_id: run for run in artefact.runs}.values()
    record = {
        "artefact": artefact.name,
        "profile": ev.profile,
        "built": datetime.now(UTC).isoformat(timespec="seconds"),
        "results_root": str(ev.results_name),
        "runs": [{"run_id": r.run_id, "state": r.state} | {k: (r.status or {}).get(k) for k in RECORDED} for r in runs],
        "manifests": {
            str(project_path(p)): hashlib.sha256(p.read_bytes()).hexdigest()[:16] if p.exists() else None for p in paths
        },
        "settings": ev.report.model_dump(mode="json", exclude={"paper_reference", "claims", "rules"}),
        "outputs": list(artefact.files),
        "missing": artefact.missing,
    }
    return json.dumps(record, indent=2, sort_keys=True) + "\n"


def publish(ev: Evidence, artefacts: list[Artefact], out_dir: Path) -> list[Path]:
    """Check every artefact has results, then publish every file as one set (swap_in); returns the paths."""
    for artefact in artefacts:
        require_results(ev, artefact)
    files = {name: data for a in artefacts for name, data in a.files.items()}
    files |= {f"{a.name}.provenance.json": provenance(ev, a) for a in artefacts}
    swap_in(
        out_dir,
        {name: data if isinstance(data, bytes) else data.encode() for name, data in files.items()},
        lambda previous: built_elsewhere(previous, ev.results_root),
    )
    return [out_dir / name for name in files]


def built_elsewhere(published: Path, results_root: Path) -> set[str]:
    """The files of the set at `published` that another results directory built (their sidecars say which), said
    on stderr: a build does not carry them into its set, so one set never mixes results directories."""
    dropped: set[str] = set()
    for sidecar in sorted(published.glob("*.provenance.json")):
        try:
            record = json.loads(sidecar.read_text())
            root = Path(record["results_root"])
        except (OSError, ValueError, KeyError, TypeError):
            continue  # (not a sidecar of ours: left as it is)
        if root.resolve() != results_root.resolve():
            outputs = [name for name in record.get("outputs", []) if isinstance(name, str)]
            dropped |= {sidecar.name, *outputs}
            print(
                f"note: {record.get('artefact')} ({', '.join(outputs)}) was built from {root}, this build reads "
                f"{results_root}: it leaves the published set (a set is built from one results directory)",
                file=sys.stderr,
            )
    return dropped


def swap_in(out_dir: Path, files: dict[str, bytes], drop: Callable[[Path], set[str]] = lambda previous: set()) -> None:
    """Make `files` part of the set published at `out_dir` (the module docstring): staged whole, then one rename;
    the previous set's files named by `drop(previous set)` are not carried over."""
    parent, name = out_dir.parent, out_dir.name
    parent.mkdir(parents=True, exist_ok=True)
    with FileLock(parent / f".{name}-publish.lock", timeout=PUBLISH_WAIT_S):  # one publisher of a set at a time
        _swap_in(out_dir, files, drop)


def _swap_in(out_dir: Path, files: dict[str, bytes], drop: Callable[[Path], set[str]]) -> None:
    out_dir = out_dir.absolute()  # mkdtemp's paths are absolute from Python 3.12 on: the cleanup compares with them
    parent, name = out_dir.parent, out_dir.name
    if out_dir.is_dir() and not out_dir.is_symlink():  # a plain directory from before sets: moved aside, linked
        out_dir.rename(Path(tempfile.mkdtemp(dir=parent, prefix=f".{name}.plain-")))
    plain = sorted(parent.glob(f".{name}.plain-*"))
    if plain and not out_dir.is_symlink():  # (a kill between the move and the link leaves it unlinked)
        out_dir.symlink_to(plain[-1].name)
    previous = out_dir.resolve() if out_dir.is_symlink() else None
    if previous is not None and not previous.is_dir():  # a link to a set someone removed: nothing to carry over
        previous = None
    staging = Path(tempfile.mkdtemp(dir=parent, prefix=f".{name}."))
    try:
        staging.chmod(FILE_MODE | (FILE_MODE & 0o444) >> 2)  # a directory: searchable where readable
        if previous is not None:
            left_out = set(files) | drop(previous)
            shutil.copytree(previous, staging, dirs_exist_ok=True, ignore=lambda d, names: set(names) & left_out)
        for file, data in files.items():
            atomic_write_with(staging / file, lambda tmp, data=data: Path(tmp).write_bytes(data))
        link = Path(f"{staging}.link")
        link.symlink_to(staging.name)
        os.replace(link, out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    for left in parent.glob(f".{name}.*"):  # the previous set, and any a killed build left behind
        if left != staging:
            shutil.rmtree(left, ignore_errors=True) if left.is_dir() and not left.is_symlink() else left.unlink(True)

"""What a command runs: each run planned once (RunPlan), resolved and checked before anything is written.

A run resolves from its run file where one is kept (experiments/runs/<profile>/<run_id>.yaml, as
written or edited), else from its grid entry: exactly what `grid` runs once it has written the run
files (gropd/config/grids.py: write_run_file). So `runs`, `grid`, `run` and `status` check every
input (profile, grids, run files, overrides, results/) before their first byte, and `status` shows
what `grid` would do. The plan keeps where each key came from, so the thread rule
(gropd/runs/lifecycle.py) reads the origin of backend.threads instead of parsing the command line again.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path

from gropd.config import ConfigError, Manifests, RunConfig, RunFileError
from gropd.config.grids import IDENTITY_KEYS, RunEntry, grid_entry, hand_edited, run_file_path, run_file_state
from gropd.config.layering import Origins, parse_overrides
from gropd.config.resolve import resolve_run_traced
from gropd.model.fit import FitError
from gropd.model.hardware import GPUNotUsableError
from gropd.model.optional import MissingDependencyError
from gropd.numerics import NumericsError
from gropd.record.run_dir import RunDir
from gropd.record.run_lock import check_free
from gropd.record.tracking import check_backends
from gropd.runs.layout_guard import check_run_id
from gropd.runs.lifecycle import changed_error, run_threads
from gropd.runs.preflight import preflight
from gropd.runs.session import Ranks

# the CLI exits 2
REFUSED = (ConfigError, RunFileError, MissingDependencyError, FitError, GPUNotUsableError, NumericsError)
RUN_IDENTITY = ("run_id", "profile", "grid", "seed", *IDENTITY_KEYS)  # what a run is; its plan fixes it
EDITED_RUN_FILE = "edited run file "  # how status.json's `set_by` names a run file edited by hand (before its path)


def check_overrides(overrides: list[str]) -> None:
    """Command-line `key.path=value` settings, before anything: each well formed (layering.parse_overrides), given
    once (a key twice, or inside another one given, gropd=... and gropd.lam=..., is refused as a repeated flag is:
    which one was meant is not for us to guess), none of them part of a run's identity (RUN_IDENTITY): an
    override changes a run's settings, never which run it is, so a grid's run ids keep meaning what they name."""
    parse_overrides(overrides)
    keys = [item.partition("=")[0] for item in overrides]
    for index, key in enumerate(keys):
        if clash := next((k for k in keys[:index] if f"{key}.".startswith(f"{k}.") or k.startswith(f"{key}.")), None):
            given = "given twice" if clash == key else f"given together with {clash}"
            raise ConfigError("command line", key, given, "each setting once")
    for key in keys:
        if key.split(".")[0] in RUN_IDENTITY:
            raise ConfigError(
                "command line",
                key,
                "an override cannot change which run a run is (its run id, profile, grid, seed, kind, pairing, "
                "method, model or mode)",
                "another run: a run file of your own (experiments/runs/<profile>/<run_id>.yaml, e.g. a copy of one "
                "`./reproduce.sh runs` writes, with its run_id set to its file name), an entry in a grid of "
                "experiments/grids/, or --seeds N for seeds 0..N-1",
            )


@dataclass(frozen=True)
class RunPlan:
    """One run as a command runs it, made once per command (plan_entry, plan_run_id): its resolved config with
    its thread count (gropd/runs/lifecycle.py), where each key came from (resolve_run_traced), the run file it
    resolved from (None: its grid entry, the file not written yet) and its directory under the results root.
    `cli`, `jobs`, `status` and the report read a run from its plan; nothing resolves it again."""

    config: RunConfig
    origins: Origins
    run_file: Path | None
    run_dir: RunDir

    def origin(self, key: str) -> str | None:
        """The layer that set dotted `key` itself (None: no layer did)."""
        return self.origins.get(key)

    @property
    def set_by(self) -> dict[str, str]:
        """Each dotted key the command line or the run's own hand-edited run file set, with which ("command line",
        or EDITED_RUN_FILE and its path): recorded in status.json, so that a report names what made a run
        depart from its grid's registered setting, whatever the run file says later."""
        edited = str(self.run_file) if self.run_file is not None and hand_edited(self.run_file) else None
        named = {"command line": "command line"} | ({edited: f"{EDITED_RUN_FILE}{edited}"} if edited else {})
        kept = [(key, named.get(origin)) for key, origin in self.origins.items() if key not in RUN_IDENTITY]
        return {key: origin for key, origin in kept if origin}  # (RUN_IDENTITY: which run it is, not a setting)

    @property
    def threads_on_purpose(self) -> bool:
        """backend.threads set on the command line or in the run's own file (the thread rule: it always wins)."""
        return self.origin("backend.threads") in ("command line", str(self.run_file) if self.run_file else None)

    def with_split(self, results_root: Path, split: int) -> RunPlan:
        """This plan under `--jobs`: a run not started and whose count is not set on purpose gets `split` threads."""
        config = run_threads(self.config, self.threads_on_purpose, results_root, split)
        return replace(self, config=config)


def plan_entry(
    manifests: Manifests, profile: str, entry: RunEntry, overrides: list[str], results_root: Path
) -> RunPlan:
    """A grid run as `grid` runs it: from its run file when that is written and current or edited, else from its
    grid entry."""
    run_file = run_file_path(manifests.root, profile, entry.run_id)
    if run_file_state(entry, run_file) in ("unchanged", "kept edited"):
        return _plan(resolve_run_traced(run_file, profile, manifests, overrides), run_file, results_root, manifests)
    resolved = resolve_run_traced(None, profile, manifests, overrides, entry.values)
    return _plan(resolved, None, results_root, manifests)


def plan_run_id(manifests: Manifests, profile: str, run_id: str, overrides: list[str], results_root: Path) -> RunPlan:
    """`run RUN_ID`'s plan: from its run file when it exists (any run file, a grid's or the user's own), else from
    its grid entry (ConfigError when no grid has it)."""
    run_file = run_file_path(manifests.root, profile, run_id)
    if run_file.exists():
        return _plan(resolve_run_traced(run_file, profile, manifests, overrides), run_file, results_root, manifests)
    return plan_entry(manifests, profile, grid_entry(run_id, manifests.root, run_file), overrides, results_root)


def _plan(
    resolved: tuple[RunConfig, Origins], run_file: Path | None, results_root: Path, manifests: Manifests
) -> RunPlan:
    config, origins = resolved
    where = origins.get("run_id") or (str(run_file) if run_file else "grid entry")
    check_run_id(config.run_id, manifests.profiles, results_root, where)  # before anything is written under it
    unthreaded = RunPlan(config, origins, run_file, RunDir.at(results_root, config.profile, config.run_id))
    return replace(unthreaded, config=run_threads(config, unthreaded.threads_on_purpose, results_root))


def require_own_directory(root: Path) -> None:
    """ConfigError when a run's directory is a symbolic link: its lock, its --force and its twins are the path's
    under results/<profile>/, its files the target's (--force said "or --force"; a run there was another's)."""
    if root.is_symlink():
        raise ConfigError(
            str(root),
            "",
            f"is a symbolic link to {os.readlink(root)}",
            "a run directory of its own: move the run's files there, or remove the link (the run then starts anew)",
        )


def refusal(plan: RunPlan, state: str, manifests: Manifests) -> Exception | None:
    """Why `grid` would refuse to start this run (another process writing it, changed, unpinned, no teacher
    server, a tracker not installed, an engine that does not fit), or None."""
    try:
        require_own_directory(plan.run_dir.root)
        if Ranks.of(plan.config).main:  # the run's writer (under a launcher, the other ranks see rank 0 holding it)
            check_free(plan.run_dir.root)
        if state == "changed":
            raise changed_error(plan.run_dir, plan.config, manifests)
        preflight(plan.config, manifests)
        check_backends(plan.config.tracking)
    except REFUSED as err:
        return err
    return None

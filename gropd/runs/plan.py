"""What a command would run, resolved and checked before anything is written.

A run resolves from its run file where one is kept (experiments/runs/<profile>/<run_id>.yaml, as
written or edited), else from its grid entry: exactly what `grid` runs once it has written the run
files (gropd/config/grids.py: write_run_file). So `runs`, `grid`, `run` and `status` check every
input (profile, grids, run files, overrides, results/) before their first byte, and `status` shows
what `grid` would do.
"""

from __future__ import annotations

from pathlib import Path

from gropd.config import ConfigError, Manifests, RunConfig, resolve_run
from gropd.config.grids import IDENTITY_KEYS, RunEntry, grid_entry, run_file_path, run_file_state
from gropd.config.layering import parse_overrides
from gropd.runs.lifecycle import run_threads

RUN_IDENTITY = ("run_id", "profile", "grid", "seed", *IDENTITY_KEYS)  # what a run is; its plan fixes it


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


def planned_run(
    manifests: Manifests, profile: str, entry: RunEntry, overrides: list[str], results_root: Path
) -> RunConfig:
    """A grid run's config as `grid` will run it (with its thread count: gropd/runs/lifecycle.py)."""
    run_file = run_file_path(manifests.root, profile, entry.run_id)
    if run_file_state(entry, run_file) in ("unchanged", "kept edited"):
        return run_threads(resolve_run(run_file, profile, manifests, overrides), overrides, run_file, results_root)
    config = resolve_run(None, profile, manifests, overrides, entry_values=entry.values)
    return run_threads(config, overrides, None, results_root)


def planned_run_id(
    manifests: Manifests, profile: str, run_id: str, overrides: list[str], results_root: Path
) -> RunConfig:
    """`run RUN_ID`'s config: its run file when it exists (any run file, a grid's or the user's own), else
    its grid entry (ConfigError when no grid has it)."""
    run_file = run_file_path(manifests.root, profile, run_id)
    if run_file.exists():
        return run_threads(resolve_run(run_file, profile, manifests, overrides), overrides, run_file, results_root)
    return planned_run(manifests, profile, grid_entry(run_id, manifests.root, run_file), overrides, results_root)

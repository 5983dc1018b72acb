"""Grids: a named set of runs (a cartesian `matrix` and/or explicit `include` entries, plus
`set` rules), expanded to editable per-run YAML files under experiments/runs/<profile>/.

A run id is readable: `<grid>__<pairing>__<method>[-<leaf><value>...][__seed<N>]` for training
runs, `<grid>__<pairing>__score[...]` for scoring passes and `<grid>__<model>-<mode>[__seed<N>]`
for evaluation-only runs, e.g. `table1__I4nothink-I1.7nothink__gropd`,
`gamma__I32nothink-I1.7nothink__gropd-lam0.2-gamma1`, `fig1__I4think-B1.7__score`.
The grid's `kind` applies to every run; an `include` entry may set its own `kind`.
"""

from __future__ import annotations

import hashlib
import itertools
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from fileio import atomic_write_text
from gropd.config.errors import ConfigError
from gropd.config.layering import dotted_to_nested, nested_to_dotted, read_yaml
from gropd.config.schema import SAFE_NAME

GRID_KEYS = {"name", "kind", "seeds", "matrix", "include", "set", "description"}
IDENTITY_KEYS = ("kind", "pairing", "method", "model", "mode")
KINDS = ("train", "eval", "score")
HEADER = "# generated from experiments/grids/{grid}.yaml; edit freely (an edited file is kept). body-sha256: {digest}\n"


@dataclass(frozen=True)
class RunEntry:
    """One run of a grid: its id and the values the grid sets (flat dotted keys)."""

    run_id: str
    values: dict[str, Any]


def grid_names(experiments_dir: Path) -> list[str]:
    return sorted(path.stem for path in (experiments_dir / "grids").glob("*.yaml"))


def load_grid(name: str, experiments_dir: Path) -> dict[str, Any]:
    """Read grids/<name>.yaml, rejecting unknown keys; an unknown grid lists the valid ones."""
    path = experiments_dir / "grids" / f"{name}.yaml"
    if not re.match(SAFE_NAME, name):
        raise ConfigError("command line", "grid", f"{name!r} is not a grid name", "one path component: " + SAFE_NAME)
    if not path.exists():
        raise ConfigError(str(path), "", f"no grid named {name!r}", f"one of {', '.join(grid_names(experiments_dir))}")
    grid = read_yaml(path)
    unknown = set(grid) - GRID_KEYS
    if unknown:
        raise ConfigError(str(path), sorted(unknown)[0], "unknown key", f"one of {', '.join(sorted(GRID_KEYS))}")
    if grid.get("name") != name:
        raise ConfigError(str(path), "name", f"{grid.get('name')!r}", f"{name!r} (the file's name)")
    kinds = {"kind": grid.get("kind", "train")}
    for i, entry in enumerate(grid.get("include") or []):
        if isinstance(entry, dict) and "kind" in entry:
            kinds[f"include[{i}].kind"] = entry["kind"]
    for key, kind in kinds.items():
        if kind not in KINDS:
            raise ConfigError(str(path), key, f"{kind!r}", " or ".join(KINDS))
    seeds = grid.get("seeds", [0])
    if not isinstance(seeds, list) or not seeds or not all(isinstance(s, int) for s in seeds):
        raise ConfigError(str(path), "seeds", f"{seeds!r}", "a non-empty list of integers")
    return grid


def expand_grid(grid: dict[str, Any], seeds: list[int] | None = None) -> list[RunEntry]:
    """The grid's runs: matrix product, then include entries, `set` rules applied, times seeds."""
    matrix = grid.get("matrix") or {}
    combos = (
        [dict(zip(matrix, values, strict=True)) for values in itertools.product(*matrix.values())] if matrix else []
    )
    combos += [dict(entry) for entry in grid.get("include") or []]
    entries: list[RunEntry] = []
    for combo in combos:
        kind = combo.get("kind", grid.get("kind", "train"))
        values = {"kind": kind, "grid": grid["name"], **combo}
        for rule in grid.get("set") or []:
            if all(combo.get(key) == want for key, want in rule["when"].items()):
                values.update(nested_to_dotted(rule["values"]))
        for seed in seeds if seeds is not None else grid.get("seeds", [0]):
            run_id = _run_id(grid["name"], kind, combo, seed)
            entries.append(RunEntry(run_id=run_id, values={**values, "seed": seed, "run_id": run_id}))
    counts = Counter(entry.run_id for entry in entries)
    if unsafe := [run_id for run_id in counts if not re.match(SAFE_NAME, run_id)]:
        raise ConfigError(
            f"experiments/grids/{grid['name']}.yaml", "", f"makes run id {unsafe[0]!r}", "one path component each"
        )
    duplicates = sorted(run_id for run_id, count in counts.items() if count > 1)
    if duplicates:
        raise ConfigError(f"experiments/grids/{grid['name']}.yaml", "", f"expands to duplicate run ids {duplicates}")
    return entries


def _fmt(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def _run_id(grid: str, kind: str, combo: dict[str, Any], seed: int) -> str:
    extras = "".join(f"-{key.split('.')[-1]}{_fmt(value)}" for key, value in combo.items() if key not in IDENTITY_KEYS)
    if kind == "eval":
        parts = [grid, f"{combo.get('model')}-{combo.get('mode')}{extras}"]
    elif kind == "score":
        parts = [grid, str(combo.get("pairing")), f"score{extras}"]
    else:
        parts = [grid, str(combo.get("pairing")), f"{combo.get('method')}{extras}"]
    if seed:
        parts.append(f"seed{seed}")
    return "__".join(parts)


def run_file_body(entry: RunEntry) -> str:
    return yaml.safe_dump(dotted_to_nested(entry.values), sort_keys=False)


def grid_entry(run_id: str, experiments_dir: Path, run_file: Path) -> RunEntry:
    """The grid entry named `run_id` (at the seed its id ends with); a ConfigError naming `run_file`, the
    file it would have, when no grid has it."""
    grid, tail = run_id.split("__", 1)[0], run_id.rsplit("__", 1)[-1]
    seed = int(tail[4:]) if tail.startswith("seed") and tail[4:].isdigit() else 0
    if grid in grid_names(experiments_dir):
        for entry in expand_grid(load_grid(grid, experiments_dir), [seed]):
            if entry.run_id == run_id:
                return entry
    raise ConfigError(str(run_file), "run_id", f"no run {run_id!r}", "an id listed by `./reproduce.sh runs`")


def _digest(body: str) -> str:
    return hashlib.sha256(body.encode()).hexdigest()[:16]


def run_file_state(entry: RunEntry, path: Path) -> str:
    """What write_run_file does with `path`: "absent" and "outdated" (the grid changed) are written,
    "unchanged" and "kept edited" (its body no longer matches its header's digest) are kept."""
    if path.parent.exists() and not path.parent.is_dir():
        raise ConfigError(str(path.parent), "", "is not a directory", "the folder of this profile's run files")
    if not path.exists():
        return "absent"
    if not path.is_file():
        raise ConfigError(str(path), "", "is not a file", "a run file (YAML), or nothing there")
    if hand_edited(path):
        return "kept edited"
    return "unchanged" if _header_digest(path) == _digest(run_file_body(entry)) else "outdated"


def _header_digest(path: Path) -> str:
    return path.read_bytes().decode("utf-8", "replace").partition("\n")[0].rsplit("body-sha256: ", 1)[-1].strip()


def hand_edited(path: Path) -> bool:
    """Whether the run file at `path` is not as `grid` wrote it: its body no longer matches its header's digest
    (a file of the user's own, without that header, is too)."""
    body = path.read_bytes().decode("utf-8", "replace").partition("\n")[2]
    return _digest(body) != _header_digest(path)


def run_file_path(experiments_dir: Path, profile: str, run_id: str) -> Path:
    """experiments/runs/<profile>/<run_id>.yaml: where a run's editable file is (the one place it is named)."""
    return experiments_dir / "runs" / profile / f"{run_id}.yaml"


def write_run_file(entry: RunEntry, path: Path) -> tuple[Path, str]:
    """Write the entry's run file at `path` (run_file_path); returns (path, "written" | "unchanged" | "kept edited")."""
    state = run_file_state(entry, path)
    if state in ("unchanged", "kept edited"):
        return path, state
    body = run_file_body(entry)
    atomic_write_text(path, HEADER.format(grid=entry.values["grid"], digest=_digest(body)) + body)
    return path, "written"

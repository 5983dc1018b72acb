"""backend.threads: how `--jobs N` shares the cores, and why a run that started keeps its count.

Threads are part of a run's identity (its config hash): a different intra-op thread count
can change the order of floating-point reductions, hence the bits of a run. The rule:

- `--jobs N` gives each run that has not started `threads = max(1, cores // N)`, so that
  N x threads <= cores;
- a run that already started keeps the count it started with, with or without --jobs: when
  its status.json's hash matches its config with the thread count recorded in its
  config.yaml, that count is used. So a grid finished with `--jobs 2` stays finished when run
  again without it, and an interrupted run resumes bit for bit, instead of showing "changed";
- a count set on purpose, on the command line (`backend.threads=T`) or in the run's YAML
  file, always wins (and changes the hash as any edit does).
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml

from gropd.config import RunConfig, config_hash
from gropd.config.errors import RunFileError
from gropd.config.layering import read_yaml
from gropd.run_dir import RunDir


def usable_cores() -> int:
    """CPU cores this process may run on (its affinity mask where the OS has one)."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def split_threads(cores: int, jobs: int) -> int:
    """Threads per run for `jobs` runs at once: max(1, cores // jobs)."""
    return max(1, cores // jobs)


def threads_set_on_purpose(overrides: list[str], run_file: Path | None) -> bool:
    """Whether backend.threads comes from the command line or the run's own YAML file."""
    if any(item.partition("=")[0].strip() == "backend.threads" for item in overrides):
        return True
    if run_file is None or not run_file.exists():
        return False
    backend = read_yaml(run_file).get("backend")
    return isinstance(backend, dict) and "threads" in backend


def with_threads(config: RunConfig, threads: int | None) -> RunConfig:
    """The same config with backend.threads = threads."""
    return config.model_copy(update={"backend": config.backend.model_copy(update={"threads": threads})})


def keep_started_threads(config: RunConfig, results_root: Path) -> RunConfig:
    """`config` with the thread count its run started with, when that is the only difference from
    the recorded run; `config` unchanged otherwise (new run, other changes, unreadable files)."""
    run_dir = RunDir(results_root / config.profile / config.run_id)
    try:
        recorded_hash = (run_dir.read_status() or {}).get("config_hash")
        recorded = yaml.safe_load(run_dir.config_path.read_text())["backend"]["threads"]
    except (OSError, ValueError, TypeError, KeyError, AttributeError, yaml.YAMLError, RunFileError):
        return config
    if recorded_hash is None or recorded_hash == config_hash(config):
        return config
    candidate = with_threads(config, recorded)
    return candidate if config_hash(candidate) == recorded_hash else config

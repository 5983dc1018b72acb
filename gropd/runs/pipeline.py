"""Run one run id end to end: resolve its config, train (kind train) and evaluate, or score (kind
score: sample, teacher-score and grade the untrained student's responses), record status.

A finished run (same config hash) is not redone, nor is a new run whose twin (the same settings
under another id: gropd/runs/lifecycle.py) finished; an interrupted one resumes; a run whose config changed
since it started is refused unless `force` (which starts it afresh).

No evaluation engine shares a process with training engines, on any route. Several ranks under a launcher
train and stop at `trained`: the evaluation is then `evaluate` (`gropd.cli evaluate`), launched again as
processes of its own over every GPU (experiments/launch/slurm_run.sbatch does both). One process (`gropd.cli
run`) trains, shuts its vLLM engines down, and starts the evaluation as a process of its own (`gropd.cli
evaluate RUN_ID --recorded`: the config it trained with), whose records are those of any evaluation of the run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from gropd.config import ConfigError, Manifests, RunConfig, RunFileError, config_hash, config_yaml, resolve_run
from gropd.config.grids import RunEntry, expand_grid, grid_entry, load_grid, run_file_path, write_run_file
from gropd.credit import method
from gropd.numerics import enter
from gropd.record.ranges import planned_k
from gropd.record.run_dir import DONE, RunDir, delete_tree
from gropd.record.run_lock import check_free, child_env, hold_run
from gropd.record.tracking import check_backends, log_evaluation
from gropd.runs.lifecycle import (
    changed_error,
    checkpoints_of,
    copy_twin,
    digests_of,
    run_state,
    stamps_of,
    twin_to_copy,
)
from gropd.runs.preflight import job_gpu_split
from gropd.runs.session import Ranks, refuse_live_owner, run_session
from gropd.train.watchdog import RunLimits
from gropd.train.world import rank_share


def grid_entries(
    manifests: Manifests, grids: list[str], seeds: list[int] | None = None, profile: str | None = None
) -> list[RunEntry]:
    """The runs of `grids`; with `profile`, only those it has the models for (a run whose pairing or model names a
    label the profile lacks, as tiny-long lacks I32, is left out: Manifests.lacks)."""
    entries = [entry for name in grids for entry in expand_grid(load_grid(name, manifests.root), seeds)]
    return entries if profile is None else [entry for entry in entries if not manifests.lacks(profile, entry.values)]


def materialise(manifests: Manifests, profile: str, entries: list[RunEntry]) -> list[tuple[RunEntry, Path, str]]:
    """Write (or keep, when edited) experiments/runs/<profile>/<run_id>.yaml for each entry."""
    return [(entry, *write_run_file(entry, run_file_path(manifests.root, profile, entry.run_id))) for entry in entries]


def find_run_file(manifests: Manifests, profile: str, run_id: str) -> Path:
    """The run's YAML, generated from its grid if it does not exist yet."""
    path = run_file_path(manifests.root, profile, run_id)
    return path if path.exists() else write_run_file(grid_entry(run_id, manifests.root, path), path)[0]


def load_run(manifests: Manifests, profile: str, run_id: str, overrides: list[str] | None = None) -> RunConfig:
    return resolve_run(find_run_file(manifests, profile, run_id), profile, manifests, overrides)


def open_run_dir(
    config: RunConfig, manifests: Manifests, run_dir: RunDir, set_by: dict[str, str] | None = None
) -> None:
    """Write the run's config (its directory made with it); a run without a status.json gets its first one
    (identity, who set its keys: `set_by`, status running, step 0)."""
    run_dir.write_config(config_yaml(config))
    if run_dir.read_status() is None:
        fields = identity(config, manifests) | {"set_by": set_by or {}}
        run_dir.update_status(**fields, status="running", reason=None, step=0, collapse_step=None)


def planned_state(config: RunConfig, results_root: Path, manifests: Manifests, force: bool = False) -> str:
    """What `execute` would do with the run, in words: its run_state, "new (results of <twin>)" when a
    twin's results would be copied, or "forced (started afresh)"."""
    if force:
        return "forced (started afresh)"
    state = run_state(config, results_root, manifests)[1]
    twin = twin_to_copy(config, state, manifests, results_root, force)
    return f"new (results of {twin.root.name})" if twin is not None else state


def execute(
    config: RunConfig,
    manifests: Manifests,
    results_root: Path,
    force: bool = False,
    set_by: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Bring one run to `finished` or `collapsed`; returns its status. `force` deletes the run's
    directory first, unread (so it also redoes a run whose files are broken). `set_by` (RunPlan.set_by: the keys
    the command line or an edited run file set) goes into a new run's status.json.

    Launched as several ranks (`accelerate launch`), every rank decides from the same reading of the
    run's files (all read, then meet, before rank 0 writes anything), every rank trains, only rank 0
    writes the run's files, and no rank evaluates: the run stops at `trained` (kind eval: as opened),
    and `evaluate` runs in processes of its own. One process evaluates in a process of its own once its
    session ends (evaluate_in_own_process). A process count that cannot share Table 3's batches is
    refused first (gropd/train/world.py). The process computes in the run's numerics mode (gropd/numerics.py),
    set before torch loads, or is refused.
    """
    enter(config.backend.numerics)
    limits = planned_limits(config, manifests)
    ranks = Ranks.of(config, limits.collective_s if limits else None)
    if config.kind == "train":
        rank_share(config.train, ranks.world)
    root = RunDir.at(results_root, config.profile, config.run_id).root
    with hold_run(root, held=ranks.main):  # one writer per run (gropd/record/run_lock.py), before anything
        if ranks.main:
            refuse_live_owner(RunDir(root))  # a writer whose lock file was deleted still holds the run
        return _execute(config, manifests, results_root, force, ranks, root, set_by or {}, limits)


def planned_limits(config: RunConfig, manifests: Manifests) -> RunLimits | None:
    """A paper training run's start-up deadline and collective timeout from its plan (gropd/runs/job_plan.py: its
    vLLM engines'); None for the other profiles (their runs keep the watchdog's step rule and DEFAULT_TIMEOUT_S)."""
    if config.profile != "paper" or config.kind != "train" or config.backend.rollout != "vllm":
        return None
    from gropd.model.components import teacher_wait_s
    from gropd.runs.job_plan import run_limits

    return run_limits(config, manifests, teacher_wait_s(os.environ))


def _execute(
    config: RunConfig,
    manifests: Manifests,
    results_root: Path,
    force: bool,
    ranks: Ranks,
    root: Path,
    set_by: dict[str, str],
    limits: RunLimits | None,
) -> dict[str, Any]:
    if force and ranks.main:
        delete_tree(root, "--force deletes the run's directory")
    ranks.meet()
    run_dir, state = run_state(config, results_root, manifests)
    ranks.meet()
    if state in DONE:
        refuse_broken_record(run_dir, manifests)
        print(f"[{config.run_id}] already {state}; nothing to do (--force redoes it)", file=sys.stderr)
        return run_dir.read_status() or {}
    if state == "changed":
        raise changed_error(run_dir, config, manifests)
    status = run_dir.read_status()
    if config.kind == "train" and (status is None or run_dir.stage(status) == "running"):  # it trains: from where?
        run_dir.check_resumable(config_hash(config), config.train.steps, vouched=status is not None)
    check_backends(config.tracking)
    twin = twin_to_copy(config, state, manifests, results_root, force)
    if twin is not None:
        print(
            f"[{config.run_id}] same settings as finished run {twin.root.name}: its results are copied", file=sys.stderr
        )
        fields = identity(config, manifests) | {"set_by": set_by}  # its own, not the twin's
        status = copy_twin(twin, run_dir, config, fields) if ranks.main else {}
        ranks.meet()
        return run_dir.read_status() or status
    if ranks.main:
        open_run_dir(config, manifests, run_dir, set_by)
    ranks.meet()
    with run_session(run_dir, main=ranks.main, backend=config.backend) as status:
        if config.kind == "train" and status["status"] == "running":
            from gropd.train.loop import train_run

            split = job_gpu_split(config, manifests)  # null engine shares: fit.py's split of this job's card
            ended = train_run(split, manifests, run_dir, limits)  # ends every rank's process group
            status = run_dir.update_status(**ended) if ranks.main else {**status, **ended}
        if config.kind == "score" and status["status"] == "running":
            from gropd.train.scoring import score_run

            scored = score_run(job_gpu_split(config, manifests), manifests, run_dir)
            return run_dir.update_status(**scored) if ranks.main else {**status, **scored}
        if status["status"] not in ("trained", "running"):
            return status
        if ranks.world > 1:
            if ranks.main:
                print(
                    f"[{config.run_id}] {status['status']}; launched as {ranks.world} processes, it is evaluated "
                    f"by processes of its own: `gropd.cli evaluate {config.run_id} --profile {config.profile}` "
                    "under the same launcher",
                    file=sys.stderr,
                )
            return status
    return evaluate_in_own_process(config, manifests, run_dir)


def refuse_broken_record(run_dir: RunDir, manifests: Manifests) -> None:
    """RunFileError (exit 2) when a run that says it is done has a record no report would believe
    (RunDir.record_problem: "finished" without its metric lines, a collapse its metrics do not bear out, ...): it
    is neither redone in silence nor called done."""
    status, config = run_dir.read_status() or {}, run_dir.read_config()
    record = (run_dir.read_metrics(), run_dir.read_summary(), run_dir.read_horizon())
    ks = planned_k(config, manifests.suites.get(run_dir.root.parent.name) or {})
    if problem := run_dir.record_problem(status, config, *record, ks):
        problem = f"says {status.get('status')}, but its record cannot be believed: {problem}"
        raise RunFileError(str(run_dir.status_path), problem, run_dir.remedy)


def evaluate_in_own_process(config: RunConfig, manifests: Manifests, run_dir: RunDir) -> dict[str, Any]:
    """A one-process run's evaluation as a process of its own: `gropd.cli evaluate RUN_ID --recorded` (the
    config.yaml this process trained with), from the project's root (the results directory named as this process
    names it, so its records name the model as an in-process evaluation did), with this process's gropd and output;
    memory this process freed is returned to the device first. The run's status once it has ended;
    RuntimeError when it failed (its own session recorded why; rerunning the run evaluates it again)."""
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    results_root, project = run_dir.root.parent.parent, manifests.root.parent
    if not results_root.is_absolute() and Path.cwd().resolve() != project.resolve():
        results_root = results_root.resolve()  # the child starts in the project's root; kept as given from there
    command = [sys.executable, "-m", "gropd.cli", "--results", str(results_root), "evaluate", config.run_id]
    command += ["--profile", config.profile, "--recorded"]
    code_root = str(Path(__file__).resolve().parents[2])  # the gropd/ and eval/ this process imported
    path = os.pathsep.join(filter(None, (code_root, os.environ.get("PYTHONPATH"))))
    print(f"[{config.run_id}] trained; evaluating it in a process of its own", file=sys.stderr, flush=True)
    env = {**os.environ, "PYTHONPATH": path, **child_env(run_dir.root)}  # it writes under this process's lock
    done = subprocess.run(command, cwd=project, env=env)
    if done.returncode:
        raise RuntimeError(
            f"[{config.run_id}] its evaluation (`{' '.join(command[1:])}`) exited with {done.returncode}; the run "
            "stays trained: run it again to evaluate it"
        )
    return run_dir.read_status() or {}


def recorded_config(results_root: Path, profile: str, run_id: str) -> RunConfig:
    """The config run `run_id` recorded (results/<profile>/<run_id>/config.yaml, its resolved form): what it
    was trained with. ConfigError naming the file when it is not that run's resolved config."""
    run_dir = RunDir(results_root / profile / run_id)
    try:
        config = RunConfig.model_validate(run_dir.read_config())
    except ValidationError as err:
        raise ConfigError(
            str(run_dir.config_path),
            "config.yaml",
            f"not a resolved run config ({err.error_count()} problems, first: {err.errors()[0]['msg']})",
            f"the file `gropd.cli run {run_id}` wrote: run it again",
        ) from None
    if (config.run_id, config.profile) != (run_id, profile):
        found = f"run {config.run_id!r} of profile {config.profile!r}"
        raise ConfigError(str(run_dir.config_path), "run_id, profile", found, f"run {run_id!r} of {profile!r}")
    return config


def evaluate(
    config: RunConfig, manifests: Manifests, results_root: Path, shard: tuple[int, int] = (0, 1)
) -> dict[str, Any]:
    """`gropd.cli evaluate`: evaluate a run whose training has ended (or an eval run that `run` opened),
    this process being shard (rank, world) (gropd/runs/evaluation.py: claim_shard). Shards meet only
    through their files (eval/shards.py); rank 0 records the run finished. Each shard holds a lock of its own
    (shard 0 the run's), taken before it reads the run's state. It computes in the run's numerics mode."""
    enter(config.backend.numerics)
    role = "" if shard[0] == 0 else f"shard{shard[0]}"
    root = RunDir.at(results_root, config.profile, config.run_id).root
    if not role:
        check_free(root)  # another writer first, then the run's own state: refusals before the lock's first byte
    evaluable(config, manifests, results_root)  # (and again under the lock)
    with hold_run(root, role=role):
        if not role:
            refuse_live_owner(RunDir(root))
        return _evaluate(config, manifests, results_root, shard)


def _evaluate(config: RunConfig, manifests: Manifests, results_root: Path, shard: tuple[int, int]) -> dict[str, Any]:
    run_dir, state = evaluable(config, manifests, results_root)
    if state in DONE:
        print(f"[{config.run_id}] already {state}; nothing to evaluate", file=sys.stderr)
        return run_dir.read_status() or {}
    with run_session(run_dir, main=shard[0] == 0, backend=config.backend) as status:
        return evaluate_and_finish(config, manifests, run_dir, status, shard)


def evaluable(config: RunConfig, manifests: Manifests, results_root: Path) -> tuple[RunDir, str]:
    """(run directory, state) of a run `evaluate` may act on (done, or trained: eval runs also started);
    ConfigError naming status.json or the change otherwise. Reads only."""
    run_dir, state = run_state(config, results_root, manifests)
    status = run_dir.read_status() or {}
    if state in DONE:
        return run_dir, state
    if state == "changed":
        expected = "the config and models it was trained with (the same key=value overrides)"
        raise changed_error(run_dir, config, manifests, expected)
    stage = status.get("failed_in") if status.get("status") == "failed" else status.get("status")
    ready = {"train": ("trained",), "eval": ("running", "trained")}.get(config.kind, ())
    if stage not in ready:
        raise ConfigError(
            str(run_dir.status_path),
            "status",
            f"run {config.run_id} ({config.kind}) is {state}" + (f" ({stage})" if stage else ""),
            f"a {'trained' if config.kind == 'train' else 'started'} run: `gropd.cli run {config.run_id} "
            f"--profile {config.profile}` first",
        )
    return run_dir, state


def evaluate_and_finish(
    config: RunConfig, manifests: Manifests, run_dir: RunDir, status: dict[str, Any], shard: tuple[int, int]
) -> dict[str, Any]:
    """This process's shard of the run's evaluation; rank 0 logs the summary and records `finished`."""
    from gropd.runs.evaluation import evaluate_run

    summary = evaluate_run(config, manifests, run_dir, shard)
    if summary is None:
        return status
    log_evaluation(config, run_dir.root, summary, step=status.get("step", 0) + 1)
    return run_dir.update_status(status="finished")


def identity(config: RunConfig, manifests: Manifests) -> dict[str, Any]:
    """The fields reports select runs by (results/README.md)."""
    fields = {
        "run_id": config.run_id,
        "config_hash": config_hash(config),
        "kind": config.kind,
        "grid": config.grid,
        "seed": config.seed,
        "profile": config.profile,
    }
    if config.kind in ("train", "score"):
        student = manifests.pairings[config.pairing]["student"]
        record = method(config.method) if config.method else None  # a score run has none
        fields |= {
            "pairing": config.pairing,
            "method": config.method,
            "model": student["model"],
            "mode": student["mode"],
            "lam": config.gropd.lam if record and record.reads("gropd.lam") else None,
            "gamma": config.gropd.gamma if record and record.reads("gropd.gamma") else None,
        }
    else:
        fields |= {"model": config.model, "mode": config.mode, "pairing": None, "method": None}
    stamps = stamps_of(config, manifests)  # before the digests: a file written in between is read again later
    return (
        fields
        | {"checkpoints": checkpoints_of(config, manifests), "digests": digests_of(config, manifests)}
        | {"stamps": stamps}
    )

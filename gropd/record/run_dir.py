"""One run's directory under results/<profile>/<run_id>/ (layout in results/README.md), and the one
place its files are read back.

Writing: status.json and config.yaml are rewritten atomically; metrics.jsonl is appended one line
per rollout batch and, on resume, cut back to the last checkpointed step so each step appears
exactly once; a checkpoint directory (checkpoints/step_<N>/, final/) is written under a temp name,
sealed with files.json (the size of every file in it) and only then renamed.

Reading back: a file that is not valid, cut short, missing or edited raises RunFileError naming
the file and what to do (delete the run directory, or pass --force to start the run afresh).
The one thing tolerated is a torn last line of a JSON-lines file (an append cut short by a
crash): it is dropped, with a note on stderr.
"""

from __future__ import annotations

import errno
import json
import math
import re
import shutil
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from fileio import (
    FILE_MODE,
    RunFileError,
    append_jsonl,
    atomic_write_json,
    atomic_write_text,
    load_yaml,
    read_jsonl,
    read_text,
)
from gropd.config.errors import ConfigError
from gropd.config.resolve import data_hash
from gropd.config.schema import SAFE_NAME, CollapseRule
from gropd.record.collapse import collapse_reason
from gropd.record.ranges import horizon_problem, metrics_problem, summary_problem

STATES = ("running", "trained", "finished", "collapsed", "failed")
DONE = ("finished", "collapsed")  # the states a run ends in: not redone
SEAL = "files.json"


def seal(directory: Path) -> None:
    """Write directory/files.json: {relative path: size in bytes} of every file under `directory`, each file given
    the mode a plainly created one gets (FILE_MODE: safetensors writes its weights 0600)."""
    files = [path for path in sorted(directory.rglob("*")) if path.is_file() and path.name != SEAL]
    for path in files:
        path.chmod(FILE_MODE)
    sizes = {str(path.relative_to(directory)): path.stat().st_size for path in files}
    atomic_write_json(directory / SEAL, sizes)


def _read_json(path: Path, remedy: str) -> Any:
    try:
        text = read_text(path, remedy)
    except OSError as exc:  # a directory in its place, no read permission, ...
        raise RunFileError(str(path), f"cannot be read ({exc.strerror or exc})", remedy) from None
    try:
        return json.loads(text)
    except ValueError as exc:  # (JSONDecodeError, or an integer too long for int())
        raise RunFileError(str(path), "empty" if not text.strip() else f"not valid JSON ({exc})", remedy) from None


def now_utc() -> str:
    """This moment as status.json's `updated` records it: ISO 8601 in UTC, with its offset (2026-12-05T20:12:07+00:00),
    so a reader on another host, in another zone, reads the same moment (updated_timestamp)."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def updated_timestamp(updated: Any) -> float | None:
    """The POSIX time of status.json's `updated` (None when it is not an ISO 8601 time). A record without a zone
    (written before `updated` carried one: the writer's local time, which no reader can know) is read as this
    process's local time, as it was then."""
    try:
        return datetime.fromisoformat(updated).timestamp()
    except (TypeError, ValueError, OverflowError):
        return None


MAX_PID = 2**31 - 1  # pid_t is a 32-bit signed integer (Linux's own pid_max is at most 2**22)


def session_problem(status: dict[str, Any]) -> str | None:
    """What is wrong with the session fields of a status.json, None when nothing: `pid` a process id (1 to MAX_PID),
    `wall_s` a finite number of seconds >= 0, as gropd/runs/session.py writes them (a hand edit can make them
    anything JSON allows: Infinity, NaN, 10**20, -1)."""
    pid, wall = status.get("pid"), status.get("wall_s")
    if pid is not None and (type(pid) is not int or not 0 < pid <= MAX_PID):
        return f"pid {pid!r} is not a process id (expected an integer from 1 to {MAX_PID})"
    if wall is not None and (type(wall) not in (int, float) or not math.isfinite(wall) or wall < 0):
        return f"wall_s {wall!r} is not a wall time (expected a finite number of seconds >= 0)"
    return None


def delete_tree(root: Path, why: str) -> None:
    """Delete `root` and everything under it (nothing when it is absent), or raise RunFileError naming what could
    not be deleted (a folder without write permission, another user's files, NFS's `.nfs*` files): never a run
    started over a half-deleted one. `why`: what the deletion was for, said in the error."""
    failed: list[str] = []

    def note(path: str, exc: BaseException) -> None:  # (a folder left non-empty by what failed in it is no cause)
        if not isinstance(exc, FileNotFoundError) and getattr(exc, "errno", None) != errno.ENOTEMPTY:
            failed.append(f"{path} ({getattr(exc, 'strerror', None) or exc})")

    if sys.version_info >= (3, 12):
        shutil.rmtree(root, onexc=lambda _function, path, exc: note(path, exc))
    else:
        shutil.rmtree(root, onerror=lambda _function, path, exc_info: note(path, exc_info[1]))
    if failed or root.exists() or root.is_symlink():
        shown = "; ".join(failed[:3]) + (f"; and {len(failed) - 3} more" if len(failed) > 3 else "")
        problem = f"{why}: cannot delete {len(failed)} path(s) under it: {shown or 'it is still there'}"
        raise RunFileError(str(root), problem, f"make them deletable (or delete {root} yourself) and run it again")


class RunDir:
    @classmethod
    def at(cls, results_root: Path, profile: str, run_id: str) -> RunDir:
        """results_root/<profile>/<run_id>/, the one way a run's directory is named from its identity: both names
        single path components (schema.SAFE_NAME), so nothing a run writes or --force deletes is outside it."""
        for key, name in (("profile", profile), ("run_id", run_id)):
            if not re.match(SAFE_NAME, name):
                raise ConfigError(str(results_root), key, f"{name!r} is not one path component", SAFE_NAME)
        return cls(results_root / profile / run_id)

    def __init__(self, root: Path):
        self.root = root
        self.config_path = root / "config.yaml"
        self.status_path = root / "status.json"
        self.metrics_path = root / "metrics.jsonl"
        self.checkpoints = root / "checkpoints"
        self.final = root / "final"
        self.eval_dir = root / "eval"
        self.summary_path = self.eval_dir / "summary.json"
        self.horizon_path = root / "horizon.json"  # a scoring pass's J_H(H) (gropd.horizon.separation_curve)

    @property
    def afresh(self) -> str:
        """How to redo this run from scratch (its directory is deleted unread)."""
        run_id, profile = self.root.name, self.root.parent.name
        return f"start the run afresh with `python -m gropd.cli run {run_id} --profile {profile} --force`"

    @property
    def remedy(self) -> str:
        """What to do about a broken file of this run."""
        return f"delete {self.root} and run it again, or {self.afresh}"

    # ------------------------------------------------------------------------- status and config

    def read_status(self) -> dict[str, Any] | None:
        """status.json, None when absent: a JSON object with `status` in STATES and a `config_hash`."""
        if not self.status_path.exists():
            return None
        status = _read_json(self.status_path, self.remedy)
        if not isinstance(status, dict):
            raise RunFileError(str(self.status_path), "not a JSON object", self.remedy)
        if status.get("status") not in STATES:
            problem = f"status is {status.get('status')!r}, not one of {', '.join(STATES)}"
            raise RunFileError(str(self.status_path), problem, self.remedy)
        if not isinstance(status.get("config_hash"), str):
            raise RunFileError(str(self.status_path), "no config_hash", self.remedy)
        if problem := session_problem(status):
            raise RunFileError(str(self.status_path), problem, self.remedy)
        return status

    def update_status(self, **fields: Any) -> dict[str, Any]:
        """Merge `fields` into status.json (atomically) and return the new status."""
        status = {**(self.read_status() or {}), **fields, "updated": now_utc()}
        atomic_write_json(self.status_path, status)
        return status

    def write_config(self, config_yaml: str) -> None:
        atomic_write_text(self.config_path, config_yaml)

    def read_config(self) -> dict[str, Any]:
        """config.yaml as a mapping."""
        if not self.config_path.exists():
            raise RunFileError(str(self.config_path), "missing", self.remedy)
        try:
            config = load_yaml(read_text(self.config_path, self.remedy))
        except yaml.YAMLError as exc:
            raise RunFileError(str(self.config_path), f"not valid YAML ({exc})", self.remedy) from None
        if not isinstance(config, dict):
            raise RunFileError(str(self.config_path), "not a YAML mapping", self.remedy)
        return config

    @staticmethod
    def stage(status: dict[str, Any]) -> str:
        """The state a run's files are in: its status, or for a failed run the state it failed in (running when
        status.json does not say)."""
        return (status.get("failed_in") or "running") if status["status"] == "failed" else status["status"]

    def check(self, status: dict[str, Any]) -> None:
        """Raise RunFileError if a file that carrying this run on would read is broken.

        config.yaml must hash to status.json's config_hash (data_hash); a running train run needs a
        readable metrics.jsonl and, if it has one, a complete latest checkpoint; a trained one a
        complete final/; a run not yet finished needs readable eval/<suite>.jsonl files. A failed run
        is checked as the status it failed in.
        """
        state = self.stage(status)
        if data_hash(self.read_config()) != status["config_hash"]:
            raise RunFileError(
                str(self.config_path),
                f"does not match config_hash {status['config_hash']} in {self.status_path.name} (edited or cut short)",
                self.remedy,
            )
        if status.get("kind") == "train" and state == "running":
            read_jsonl(self.metrics_path, self.remedy, note=False)
            if latest := self.latest_checkpoint():
                self.read_checkpoint(*latest)
        if status.get("kind") == "train" and state == "trained":
            self.check_sealed(self.final, self.remedy)
        if state in ("running", "trained"):
            for path in sorted(self.eval_dir.glob("*.jsonl")):
                read_jsonl(path, f"delete {path} (its suite is evaluated again)", note=False)

    def record_problem(
        self,
        status: dict[str, Any],
        config: dict[str, Any],
        metrics: list[dict[str, Any]],
        summary: dict[str, Any] | None = None,
        horizon: dict[str, Any] | None = None,
        ks: dict[str, int] | None = None,
    ) -> str | None:
        """Why the record of a run whose training ended cannot be believed, None when it can: status.json and
        config.yaml name the run and profile of the directory they are in (results/<profile>/<run_id>/), its summary
        (of the configured size: eval.questions, and `ks`, planned_k, when given) and J_H curve are within their
        ranges (gropd/record/ranges.py), and a train or score run's metrics.jsonl holds steps 1..N once each, in
        order, N its status's step, each number within its range (metrics_problem); a train run finished
        uncollapsed has N its train.steps; a collapsed one (train runs alone collapse) its collapse_step an
        integer in 1..train.steps equal to N, at which its metrics bear the collapse out (collapse_reason: a
        non-finite number or the config's rule firing). A reader shows such a run as missing, never as a number."""
        place = {"profile": self.root.parent.name, "run_id": self.root.name}
        for name, record in (("status.json", status), ("config.yaml", config)):
            for key, want in place.items():
                if record.get(key) != want:
                    return f"{name} says {key} {record.get(key)!r}, but it is in {self.root}"
        if problem := summary_problem(summary, config, ks) or horizon_problem(horizon):
            return problem
        if config.get("kind") not in ("train", "score") or status["status"] not in (*DONE, "trained"):
            return None
        steps, last = [record["step"] for record in metrics], status.get("step")
        if steps != list(range(1, len(steps) + 1)):
            repeated = sorted({step for step in steps if steps.count(step) > 1})
            what = f"steps {repeated[:5]} more than once" if repeated else "steps out of order or with gaps"
            return f"{self.metrics_path.name} has {what} ({len(steps)} records)"
        if len(steps) != last:
            return f"{self.metrics_path.name} ends at step {len(steps)}, but status.json at step {last!r} (cut short?)"
        if problem := metrics_problem(metrics, config, collapsed=status["status"] == "collapsed"):
            return problem
        planned = (config.get("train") or {}).get("steps")
        if config.get("kind") == "train" and status["status"] == "finished" and last != planned:
            return f"status.json says finished at step {last}, but train.steps is {planned} (cut short?)"
        return self.collapse_problem(status, config, metrics) if status["status"] == "collapsed" else None

    def collapse_problem(
        self, status: dict[str, Any], config: dict[str, Any], metrics: list[dict[str, Any]]
    ) -> str | None:
        """Why a status "collapsed" is not borne out by the run's record (None when it is; record_problem)."""
        at, planned = status.get("collapse_step"), (config.get("train") or {}).get("steps")
        if config.get("kind") != "train":
            return f"status.json says collapsed, but a {config.get('kind')} run does not train"
        if type(at) is not int or type(planned) is not int or not 1 <= at <= planned:
            return f"status.json says collapsed at step {at!r}, not a step of the run's 1..{planned}"
        if at != len(metrics):
            return f"status.json says collapsed at step {at}, but {self.metrics_path.name} ends at step {len(metrics)}"
        try:
            rule = CollapseRule.model_validate(config.get("collapse"))
        except ValidationError:
            return "config.yaml has no collapse rule a collapse could be read by"
        try:
            reason = collapse_reason(metrics, rule)
        except (KeyError, TypeError):  # a record without the rule's verifier_reward or frac_at_len_cap, or not numbers
            reason = None
        if reason is None:
            return (
                f"status.json says collapsed at step {at}, but {self.metrics_path.name} holds no non-finite number "
                "there and the config's collapse rule does not fire at it"
            )
        return None

    # ------------------------------------------------------------------------- metrics and summary

    def read_metrics(self) -> list[dict[str, Any]]:
        """All complete metric records (read_jsonl: a torn last line is dropped, with a note)."""
        records = read_jsonl(self.metrics_path, self.remedy)
        if any(not isinstance(record.get("step"), int) for record in records):
            raise RunFileError(str(self.metrics_path), "a record without an integer step", self.remedy)
        return records

    def append_metrics(self, record: dict[str, Any]) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        append_jsonl(self.metrics_path, [record], sort_keys=True)

    def truncate_metrics(self, last_step: int) -> list[dict[str, Any]]:
        """Keep only the records of steps 1..last_step; returns them."""
        kept = [record for record in self.read_metrics() if record["step"] <= last_step]
        atomic_write_text(self.metrics_path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in kept))
        return kept

    def read_horizon(self) -> dict[str, Any] | None:
        """horizon.json (a scoring pass's J_H at every horizon), None when absent."""
        if not self.horizon_path.exists():
            return None
        curve = _read_json(self.horizon_path, self.remedy)
        if not isinstance(curve, dict) or not {"horizons", "values", "informative", "prompts"} <= set(curve):
            raise RunFileError(str(self.horizon_path), "not a J_H record (horizons, values, ...)", self.remedy)
        return curve

    def read_summary(self) -> dict[str, Any] | None:
        """eval/summary.json, None when absent."""
        if not self.summary_path.exists():
            return None
        summary = _read_json(self.summary_path, self.remedy)
        if not isinstance(summary, dict):
            raise RunFileError(str(self.summary_path), "not a JSON object", self.remedy)
        return summary

    # ------------------------------------------------------------------------- checkpoints

    def checkpoint_steps(self) -> list[tuple[int, Path]]:
        """Checkpoints as (step, directory), oldest first (temp `.tmp` directories excluded)."""
        found = [(path.name.split("_")[1], path) for path in self.checkpoints.glob("step_*")]
        return sorted((int(step), path) for step, path in found if step.isdigit())

    def latest_checkpoint(self) -> tuple[int, Path] | None:
        steps = self.checkpoint_steps()
        return steps[-1] if steps else None

    def read_checkpoint(self, step: int, path: Path) -> dict[str, Any]:
        """trainer_state.json of a complete checkpoint ({"step", "sampler"}), after check_sealed."""
        remedy = f"delete {path} (the run resumes from the checkpoint before it, or from the start), or {self.afresh}"
        self.check_sealed(path, remedy)
        state = _read_json(path / "trainer_state.json", remedy)
        if not isinstance(state, dict) or state.get("step") != step or "sampler" not in state:
            raise RunFileError(str(path / "trainer_state.json"), f"not the trainer state of step {step}", remedy)
        return state

    def check_resumable(self, config_hash: str, steps: int, vouched: bool) -> None:
        """RunFileError naming the latest checkpoint unless the run could have written it: its step within 1..`steps`
        (train.steps), the config hash its trainer_state.json records equal to `config_hash` (the run's), and
        metrics.jsonl holding steps 1..step (the records it resumes after). A checkpoint written before they recorded
        a hash is believed only when `vouched`: the run's own status.json, whose config hash equals the run's, is
        beside it (what_changed); a directory without one (a leftover) has nothing to vouch for it."""
        if (latest := self.latest_checkpoint()) is None:
            return
        step, path = latest
        remedy = f"delete {path} (the run resumes from the checkpoint before it, or from the start), or {self.afresh}"
        if step > steps:
            raise RunFileError(str(path), f"a checkpoint of step {step}, past this run's train.steps {steps}", remedy)
        recorded = self.read_checkpoint(step, path).get("config_hash")
        if recorded is None and not vouched:
            problem = "records no config hash, and no status.json of this run vouches for it (left over?)"
            raise RunFileError(str(path / "trainer_state.json"), problem, remedy)
        if recorded is not None and recorded != config_hash:
            problem = f"written by a run of config {recorded!r}, not this run's {config_hash!r}"
            raise RunFileError(str(path / "trainer_state.json"), problem, remedy)
        held = [record["step"] for record in self.read_metrics() if record["step"] <= step]
        if held != list(range(1, step + 1)):
            problem = f"holds {len(held)} records of steps 1..{step}, the steps checkpoint {path.name} resumes after"
            raise RunFileError(str(self.metrics_path), problem, remedy)

    @staticmethod
    def check_sealed(directory: Path, remedy: str) -> None:
        """Every file that directory/files.json lists exists with the size it was written with."""
        seal_path = directory / SEAL
        if not seal_path.exists():
            where = "" if directory.exists() else f" ({directory} does not exist)"
            problem = f"missing{where}: the directory was not completely written (or predates {SEAL})"
            raise RunFileError(str(seal_path), problem, remedy)
        sizes = _read_json(seal_path, remedy)
        if not isinstance(sizes, dict):
            raise RunFileError(str(seal_path), "not a JSON object", remedy)
        for name, size in sizes.items():
            path = directory / name
            if not path.is_file():
                raise RunFileError(str(path), f"missing (listed in {SEAL})", remedy)
            if path.stat().st_size != size:
                raise RunFileError(str(path), f"{path.stat().st_size} bytes, {size} when written (cut short)", remedy)

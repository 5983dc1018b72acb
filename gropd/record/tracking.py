"""Experiment tracking through accelerate's trackers (TensorBoard by default, W&B optional).

What goes to the trackers: every metrics.jsonl record at its own `step` (None values
skipped), the evaluation summary at the end (`eval/<suite>/<key>` and `eval/macro`, at the
step after the last training step, 1 for an evaluation-only run: W&B accepts only increasing
steps, and the evaluation may run in a later process than the training), and the resolved
config as hyper-parameters when a run starts from step 1. TensorBoard writes under
results/<profile>/<run_id>/tracking/<project>/, so `tensorboard --logdir results/` shows
every run; it stores scalars as 32-bit floats.

Resume without duplicate steps: a session that goes on after checkpoint k logs steps
k+1.. again (metrics.jsonl is cut back to k and those steps are replayed). TensorBoard's
writer is opened with purge_step = k+1: its readers (the TensorBoard UI, EventAccumulator)
drop every event of step >= k+1 written by earlier sessions, so each step shows once, with
the value that metrics.jsonl holds. That needs the new session's event file to be read after
the earlier ones: TensorBoard reads a directory's event files in name order, a name being
`events.out.tfevents.<second>.<host>.<pid>.<n>`, so two files opened in the same second sort
by pid and writer number as text ("10" before "9"): a session opened in the second of the
newest file waits for the next (after_earlier_sessions). W&B cannot rewrite history: a
resumed W&B run (same id, kept in tracking/wandb_id) ignores, with a warning, steps it
already has.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fileio import atomic_write_text
from gropd.config.layering import nested_to_dotted
from gropd.config.schema import RunConfig, TrackingSettings
from gropd.model.optional import require

if TYPE_CHECKING:
    from accelerate import Accelerator

TRACKING_DIR = "tracking"


def check_backends(settings: TrackingSettings) -> None:
    """MissingDependencyError naming the package of any chosen backend that is not installed."""
    for name in settings.backends:
        require(name, f"tracking.backends: [{name}]", f"pip install {name} (or drop {name} from tracking.backends)")


def accelerator_kwargs(settings: TrackingSettings, run_root: Path) -> dict[str, Any]:
    """Accelerator(log_with=..., project_dir=...) arguments for this run ({} when tracking is off)."""
    if not settings.backends:
        return {}
    check_backends(settings)
    return {"log_with": list(settings.backends), "project_dir": str(run_root / TRACKING_DIR)}


def hyperparameters(config: RunConfig) -> dict[str, Any]:
    """The resolved config flattened to dotted keys; lists and dicts inside lists become JSON text."""
    flat = nested_to_dotted(config.model_dump(mode="json"))
    return {key: json.dumps(value) if isinstance(value, list) else value for key, value in flat.items()}


EVENT_FILE = "events.out.tfevents."
MAX_WAIT_S = 2.0  # a newest file further ahead than this is another host's clock: waiting would not help


def after_earlier_sessions(directory: Path) -> None:
    """Return once a TensorBoard event file opened now in `directory` sorts after every one there (module docstring):
    at once unless the newest file's second is this second or later; then until the next second, at most
    MAX_WAIT_S (a newer file is a clock ahead of this one's, said on stderr)."""
    seconds = [
        int(part)
        for path in directory.glob(EVENT_FILE + "*")
        if (part := path.name[len(EVENT_FILE) :].split(".", 1)[0]).isdigit()
    ]
    newest = max(seconds, default=None)
    if newest is None or int(time.time()) > newest:
        return
    wait = newest + 1 - time.time()
    if wait > MAX_WAIT_S:
        print(
            f"tracking: {directory} has an event file from {wait:.0f} s ahead of this clock; TensorBoard may show "
            "steps of an earlier session",
            file=sys.stderr,
        )
        return
    time.sleep(wait)


def start(accelerator: Accelerator, config: RunConfig, run_root: Path, first_step: int) -> None:
    """Open the trackers for a session that logs steps `first_step`.. (purging later steps of earlier sessions)."""
    if config.tracking.backends:
        after_earlier_sessions(run_root / TRACKING_DIR / config.tracking.project)
        accelerator.init_trackers(
            config.tracking.project,
            config=hyperparameters(config) if first_step == 1 else None,
            init_kwargs=_init_kwargs(config, run_root, purge_step=first_step),
        )


def log_step(accelerator: Accelerator, record: dict[str, Any]) -> None:
    """One metrics.jsonl record at its step, its numbers alone: None values (undefined correlations, a non-finite
    number) and the record's NON_FINITE flag are skipped."""
    numbers = (int, float)
    values = {k: v for k, v in record.items() if k != "step" and isinstance(v, numbers) and not isinstance(v, bool)}
    accelerator.log(values, step=record["step"])


def summary_scalars(summary: dict[str, Any]) -> dict[str, float]:
    """eval/summary.json as scalars: eval/macro and eval/<suite>/<key> for each numeric entry."""
    values = {"eval/macro": summary["macro"]}
    for suite, entry in summary["suites"].items():
        for key, value in entry.items():
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                values[f"eval/{suite}/{key}"] = value
    return values


def log_evaluation(config: RunConfig, run_root: Path, summary: dict, step: int) -> None:
    """The evaluation summary at `step` in its own short tracker session (the hyper-parameters too for an
    evaluation-only run, which has no training session). The trackers are opened directly, not through
    an Accelerator: the evaluation runs on rank 0 alone, after training has ended every rank's group."""
    if not config.tracking.backends:
        return
    from accelerate.tracking import LOGGER_TYPE_TO_CLASS

    kwargs = _init_kwargs(config, run_root, purge_step=None)
    after_earlier_sessions(run_root / TRACKING_DIR / config.tracking.project)
    for name in config.tracking.backends:
        kind = LOGGER_TYPE_TO_CLASS[name]
        logging_dir = [str(run_root / TRACKING_DIR)] if kind.requires_logging_directory else []
        tracker = kind(config.tracking.project, *logging_dir, **kwargs.get(name, {}))
        tracker.start()
        if config.kind == "eval":
            tracker.store_init_configuration(hyperparameters(config))
        tracker.log(summary_scalars(summary), step=step)
        tracker.finish()


def _init_kwargs(config: RunConfig, run_root: Path, purge_step: int | None) -> dict[str, dict[str, Any]]:
    kwargs: dict[str, dict[str, Any]] = {"tensorboard": {"purge_step": purge_step} if purge_step is not None else {}}
    if "wandb" in config.tracking.backends:
        kwargs["wandb"] = {
            "name": config.run_id,
            "id": wandb_run_id(run_root / TRACKING_DIR),
            "resume": "allow",
            "group": config.grid,
            "dir": str(run_root / TRACKING_DIR),
            "mode": config.tracking.wandb_mode,
        }
    return kwargs


def wandb_run_id(tracking_dir: Path) -> str:
    """The run's W&B id: made once per run directory (a --force restart gets a new one), then reused on resume."""
    path = tracking_dir / "wandb_id"
    if not path.exists():
        atomic_write_text(path, uuid.uuid4().hex[:16])
    return path.read_text().strip()

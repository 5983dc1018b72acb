"""The trainer's own device memory against gropd/model/fit.py (issue 64, item 6): the logged peak with the engines
left out, the comparison with its margin that the GPU rehearsal fails on, the estimate the trainer logs being the
plan's for the same shapes, and each engine's share of the card taken from fit.py for the card a job got, a typed
share kept as an override. No GPU here: CUDA's answers are faked where a function asks for them."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from benchmarks.trainer_rehearsal import memory_checks
from gropd.config import ConfigError, load_manifests
from gropd.config.resolve import config_hash, resolve_run
from gropd.model.fit import GIB, PLANNED_GPU_BYTES, FitError
from gropd.runs.cost import PAPER_SHAPES
from gropd.runs.preflight import engines_of, job_gpu_split, memory_split, trainer_estimate, with_gpu_split
from gropd.train.device_memory import MEMORY_MARGIN, memory_metrics, over_estimate
from gropd.train.loop import trainer_estimate_gib

REPO = Path(__file__).resolve().parents[1]
H200 = 143771 * 2**20  # an H200 as nvidia-smi lists it


def paper_run(pairing: str, *overrides: str):
    values = {"kind": "train", "grid": "table1", "pairing": pairing, "method": "gropd", "run_id": f"t__{pairing}"}
    return resolve_run(None, "paper", load_manifests(REPO / "experiments"), list(overrides), entry_values=values)


def test_the_trainers_peak_is_the_updates_less_the_engines() -> None:
    """An update that peaked at 61.5 GiB beside engines holding 44.0 GiB: the trainer's own 17.5, logged beside the
    estimate; nothing of it where no update peak (a CPU) or no engine reading exists."""
    peaks = {"rollout": 50.0, "teacher": 47.25, "update": 61.5}
    assert memory_metrics(peaks, 44.0, 18.0) == {
        "memory_rollout_gib": 50.0,
        "memory_teacher_gib": 47.25,
        "memory_update_gib": 61.5,
        "memory_trainer_gib": 17.5,
        "memory_trainer_estimate_gib": 18.0,
    }
    assert memory_metrics({"rollout": None, "teacher": None, "update": None}, None, None) == {}
    assert memory_metrics(peaks, None, 18.0) == {f"memory_{k}_gib": v for k, v in peaks.items()}
    assert memory_metrics(peaks, 44.0, None)["memory_trainer_gib"] == 17.5


def test_the_measured_peak_may_pass_the_estimate_by_the_margin_and_no_more() -> None:
    """The margin is 10%: 22.0 GiB measured against 20.0 estimated is at the limit (passes); 22.01 fails, naming
    both numbers, the excess (10%) and the limit; a measured peak below the estimate passes whatever the gap."""
    assert MEMORY_MARGIN == 0.10
    assert over_estimate(22.0, 20.0) is None and over_estimate(3.0, 20.0) is None
    line = over_estimate(22.01, 20.0)
    assert line is not None and "22.01 GiB" in line and "20.00 GiB" in line and "by 10%" in line and "22.00" in line
    assert over_estimate(22.01, 20.0, margin=0.2) is None


def test_the_rehearsal_checks_each_steps_trainer_peak() -> None:
    """benchmarks/trainer_rehearsal.py reads each record's two numbers; a step over the margin carries the line it
    fails with; records without them (a CPU run) give no check."""
    records = [
        {"step": 1, "memory_trainer_gib": 30.0, "memory_trainer_estimate_gib": 36.0},
        {"step": 2, "memory_trainer_gib": 40.0, "memory_trainer_estimate_gib": 36.0},
        {"step": 3, "loss": 0.1},
    ]
    checks = memory_checks(records)
    assert [(c["step"], c["measured_gib"], c["estimate_gib"]) for c in checks] == [(1, 30.0, 36.0), (2, 40.0, 36.0)]
    assert checks[0]["problem"] is None and "exceeds" in checks[1]["problem"]  # 40 > 36 x 1.1 = 39.6


def test_the_trainers_logged_estimate_is_the_plans_for_the_same_shapes() -> None:
    """The estimate a paper run logs (its student's config.json as loaded, 8 FSDP2 processes, on CUDA) is the one
    the plan checks (gropd/runs/preflight.py trainer_estimate): the 1.7B's 27.5 GB of float32 states over 8
    shards + one layer's working set and so on; no estimate off CUDA."""
    run = paper_run("I4nothink-I1.7nothink")
    manifests = load_manifests(REPO / "experiments")
    planned = trainer_estimate(run, manifests, 8, True, PAPER_SHAPES).need / GIB
    accelerator = SimpleNamespace(device=torch.device("cuda", 0), is_fsdp2=True, num_processes=8)
    assert trainer_estimate_gib(run, accelerator, dict(PAPER_SHAPES["I1.7"])) == planned
    states = 1_720_574_976 * 16 / 8 / GIB  # the 1.7B's parameters (tied head), 16 bytes each, over 8 shards
    assert planned > states + 2  # states + working set + 2 GiB slack
    unsharded = SimpleNamespace(device=torch.device("cuda", 0), is_fsdp2=False, num_processes=1)
    assert trainer_estimate_gib(run, unsharded, dict(PAPER_SHAPES["I1.7"])) > states * 8
    cpu = SimpleNamespace(device=torch.device("cpu"), is_fsdp2=False, num_processes=1)
    assert trainer_estimate_gib(run, cpu, dict(PAPER_SHAPES["I1.7"])) is None


def test_a_job_takes_fits_split_of_its_own_card_and_a_typed_share_overrides_it() -> None:
    """The paper profile types no share: on an H100 the 4B pairings get 0.5 + 0.2 and the served 32B ones 0.7; on
    an H200 (141 GiB) the trainer's share of the card is smaller and the in-process 4B's least share holding 2
    full-length rows falls to 0.1, so the rollout engine gets 0.7. A share typed on the command line (or in
    pairings.yaml) is kept; the other comes from fit.py. The config (and its hash) stays the resolved one."""
    manifests = load_manifests(REPO / "experiments")
    run = paper_run("I4nothink-I1.7nothink")
    shares = lambda config: (config.backend.rollout_gpu_fraction, config.backend.teacher_gpu_fraction)  # noqa: E731
    assert shares(run) == (None, None)
    assert shares(with_gpu_split(run, manifests, PLANNED_GPU_BYTES, 8, True, PAPER_SHAPES)) == (0.5, 0.2)
    on_h200 = with_gpu_split(run, manifests, H200, 8, True, PAPER_SHAPES)
    engines = [e for e in engines_of(run, manifests, 8) if e.what != "evaluation engine"]
    split = memory_split(run, manifests, H200, engines, 8, True, PAPER_SHAPES)
    assert shares(on_h200) == (split.rollout, split.teacher) == (0.7, 0.1)
    assert split.rollout_fit.at_once() > 31  # more of a rank's 64 rows at once than on the H100
    served = with_gpu_split(paper_run("I32think-B1.7"), manifests, PLANNED_GPU_BYTES, 8, True, PAPER_SHAPES)
    assert shares(served) == (0.7, None)
    typed = paper_run("I4nothink-I1.7nothink", "backend.rollout_gpu_fraction=0.4")
    assert shares(with_gpu_split(typed, manifests, H200, 8, True, PAPER_SHAPES)) == (0.4, 0.1)
    assert config_hash(on_h200) != config_hash(run)  # why the run keeps its resolved config: the card is no identity
    tiny = resolve_run(None, "tiny", manifests, [], entry_values={**dict(kind="train", grid="table1"), **PAIR})
    assert with_gpu_split(tiny, manifests, 1, 1, False) is tiny  # typed 0.3, transformers engines: nothing to split


PAIR = {"pairing": "I4nothink-I1.7nothink", "method": "gropd", "run_id": "t__tiny"}


def test_a_null_share_needs_a_card_and_a_sharded_trainer(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without CUDA a job cannot size null shares (a ConfigError naming both keys); a trainer in one unsharded
    process is refused with the FSDP route (fit.py's split is planned beside a sharded trainer)."""
    manifests = load_manifests(REPO / "experiments")
    run = paper_run("I4nothink-I1.7nothink")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ConfigError, match="backend.rollout_gpu_fraction / backend.teacher_gpu_fraction"):
        job_gpu_split(run, manifests)
    with pytest.raises(FitError, match=r"one process, unsharded .*eight_gpu_fsdp.yaml"):
        with_gpu_split(run, manifests, PLANNED_GPU_BYTES, 1, False, PAPER_SHAPES)

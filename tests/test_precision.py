"""bf16 compute keeps float32 master weights and AdamW state: at the paper's lr (1e-6), updates below
bf16's resolution still move the masters (a bf16 model updated in place would keep ~98% of its
entries), checkpoints hold the masters, and final/ is saved in the compute dtype."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from tiny_runs import project, tiny_config

from fileio import FILE_MODE
from gropd.config import load_manifests
from gropd.model.checkpoints import checkpoint_ref
from gropd.record.run_dir import RunDir
from gropd.runs.pipeline import execute

pytestmark = pytest.mark.slow
RUN = "table1__I4nothink-I1.7nothink__gropd"


def test_bf16_run_at_the_paper_lr_moves_its_float32_masters(tmp_path: Path, monkeypatch) -> None:
    root = project(tmp_path)
    monkeypatch.chdir(root)
    overrides = [
        "backend.dtype=bfloat16",
        "backend.old_logprobs=recompute",
        "train.optimizer.lr=1e-6",
        "train.schedule.name=constant",
        "train.schedule.warmup_steps=0",
        "train.steps=2",
        "train.checkpoint_every=2",
        "train.prompts_per_batch=8",
        "train.minibatch_responses=32",
        "train.per_device_batch=32",
    ]
    manifests = load_manifests(root / "experiments")
    assert execute(tiny_config(root, RUN, overrides), manifests, root / "results")["status"] == "finished"
    run = RunDir(root / "results" / "tiny" / RUN)
    start = load_file(Path(checkpoint_ref(manifests, "tiny", "I1.7").path) / "model.safetensors")
    masters = load_file(run.latest_checkpoint()[1] / "model.safetensors")
    assert {str(t.dtype) for t in masters.values()} == {"torch.float32"}
    moved = sum(int((masters[n] != start[n]).sum()) for n in start) / sum(t.numel() for t in start.values())
    assert moved > 0.9, f"{moved:.1%} of the masters moved in 4 AdamW steps at lr 1e-6"
    # what a bf16 copy of the same weights keeps: most updates of ~4e-6 are below its resolution
    bf16_moved = sum(int((masters[n].bfloat16() != start[n].bfloat16()).sum()) for n in start)
    assert bf16_moved / sum(t.numel() for t in start.values()) < 0.2
    final = load_file(run.final / "model.safetensors")
    assert {str(t.dtype) for t in final.values()} == {"torch.bfloat16"}
    assert json.loads((run.final / "config.json").read_text())["dtype"] == "bfloat16"
    for name, tensor in masters.items():  # (the checkpoint keeps the tied lm_head once, as the embedding)
        torch.testing.assert_close(final[name], tensor.bfloat16(), rtol=0, atol=0)
    # every file the run wrote has the mode a plain open() gives (safetensors wrote the weights 0600)
    modes = {str(p.relative_to(run.root)): p.stat().st_mode & 0o777 for p in run.root.rglob("*") if p.is_file()}
    assert {name for name, mode in modes.items() if mode != FILE_MODE} == set()

"""The transformers teacher under `accelerate launch` with FSDP: every rank scores with the real weights.

Our launch configs set fsdp_cpu_ram_efficient_loading, so `accelerate launch` exports ACCELERATE_USE_FSDP=true
and FSDP_CPU_RAM_EFFICIENT_LOADING=true; transformers 5.20.2 then gives every rank but each node's local rank 0
zeros (modeling_utils.py, `_move_missing_keys_from_meta_to_device` behind `is_fsdp_enabled()`, which needs a
process group), for accelerate's prepare to broadcast. The teacher is never prepared. Shown here as a one-process
gloo world whose process is LOCAL_RANK=1 (what rank 1 of a node sees), and a 2-process world in which one rank's
teacher is zeros: both ranks stop before scoring."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from gropd.config import load_manifests
from gropd.model.checkpoints import checkpoint_ref, load_model

pytestmark = pytest.mark.slow  # each test starts Python processes that load a tiny model
REPO = Path(__file__).resolve().parents[1]
LAUNCHED_FSDP = {"ACCELERATE_USE_FSDP": "true", "FSDP_CPU_RAM_EFFICIENT_LOADING": "true"}

LOCAL_RANK_1 = """
import json, os, sys, torch, torch.distributed as dist
from pathlib import Path
from gropd.config import load_manifests
from gropd.config.resolve import resolve_run
from gropd.model.components import build_teacher, pairing_roles
dist.init_process_group("gloo", init_method="tcp://127.0.0.1:" + sys.argv[1], rank=0, world_size=1)
manifests = load_manifests(Path("experiments"))
values = {"kind": "train", "grid": "table1", "pairing": "I4nothink-I1.7nothink", "method": "opd", "run_id": "t"}
config = resolve_run(None, "tiny", manifests, ["backend.teacher=hf"], entry_values=values)
teacher = build_teacher(config, pairing_roles(config, manifests)[1], torch.device("cpu"), 0)
print(json.dumps({
    "sum": sum(float(t.abs().sum()) for t in teacher.model.state_dict().values()),
    "variable_after": os.environ.get("FSDP_CPU_RAM_EFFICIENT_LOADING"),
}))
"""

ONE_RANK_ZEROS = """
import json, os, sys, torch, torch.distributed as dist
from pathlib import Path
from gropd.config import load_manifests
from gropd.model.checkpoints import checkpoint_ref, load_model, require_same_on_every_rank
dist.init_process_group("gloo")
model = load_model(checkpoint_ref(load_manifests(Path("experiments")), "tiny", "I4"), torch.device("cpu"), "float32")
if dist.get_rank() == 1:
    with torch.no_grad():
        for p in model.parameters():
            p.zero_()
try:
    require_same_on_every_rank(model, "teacher I4")
    outcome = "scored"
except RuntimeError as err:
    outcome = str(err)
Path(sys.argv[1], f"rank{dist.get_rank()}.json").write_text(json.dumps(outcome))
"""


def free_port() -> str:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return str(sock.getsockname()[1])


def python(*argv: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    environ = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", **env}
    return subprocess.run([sys.executable, *argv], cwd=REPO, env=environ, capture_output=True, text=True, timeout=300)


def test_the_teacher_of_a_launched_rank_other_than_0_has_the_real_weights() -> None:
    """Before the fix this rank's teacher summed to 0.0 (a uniform distribution at every position)."""
    ref = checkpoint_ref(load_manifests(REPO / "experiments"), "tiny", "I4")
    plain = sum(float(t.abs().sum()) for t in load_model(ref, torch.device("cpu"), "float32").state_dict().values())
    done = python("-c", LOCAL_RANK_1, free_port(), env={**LAUNCHED_FSDP, "LOCAL_RANK": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert plain > 0 and got["sum"] == plain, (got, plain)
    assert got["variable_after"] == "true"  # the launcher's setting is back for the student's load


def test_a_rank_whose_teacher_differs_stops_every_rank_before_scoring(tmp_path: Path) -> None:
    script = tmp_path / "one_rank_zeros.py"
    script.write_text(ONE_RANK_ZEROS)
    launch = ["-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port", free_port()]
    done = python(*launch, str(script), str(tmp_path), env={})
    outcomes = [json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in (0, 1)]
    assert all("teacher I4 differs between the processes" in outcome for outcome in outcomes), (outcomes, done.stderr)

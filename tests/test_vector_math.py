"""A portable computation calls no MKL vector-math (VML) routine (gropd/vector_math.py): on an AMD CPU MKL_CBWR
does not reach VML, so one such call makes a run's bits depend on the CPU's vendor. The scan runs on any CPU: it
names the ATen ops that PyTorch sends to VML, so an Intel-only CI catches what only an AMD CPU would show."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from tiny_runs import REPO, project
from transformers import Qwen3Config
from transformers.models.qwen3.modeling_qwen3 import Qwen3RotaryEmbedding

from gropd import vector_math
from gropd.model.rotary_table import RotaryTable
from gropd.numerics import environment

# The float ops PyTorch 2.13 sends to VML on a CPU: aten/src/ATen/cpu/vml.h and UnaryOpsKernel.cpp, and measured
# call by call (tools/vml_calls.py: a breakpoint on every VML entry point of libtorch_cpu.so); logsumexp calls exp
# and log, pow with exponent 0.5 calls sqrt. log1p and expm1 are ATen's own in this build.
VML_ROUTED = {
    "exp", "log", "sqrt", "sin", "cos", "tan", "tanh", "erf", "erfc", "erfinv", "log2", "log10", "acos", "asin",
    "atan", "trunc", "logsumexp",
}  # fmt: skip


def vml_routed(op: str, pow_calls: dict[str, int]) -> list[str]:
    """The scan's ops that reach VML: VML_ROUTED ops (in place, out= and _foreach_ forms too), pow(x, 0.5)."""
    base = op.removeprefix("_foreach_").rstrip("_")
    found = [op] if base in VML_ROUTED else []
    return found + [call for call in pow_calls if op == "pow" and ("0.5)" in call or "0.5," in call)]


def test_the_vml_list_names_what_the_scan_would_see() -> None:
    assert vml_routed("exp", {}) == ["exp"] and vml_routed("sqrt_", {}) == ["sqrt_"]
    assert vml_routed("_foreach_sqrt", {}) == ["_foreach_sqrt"] and vml_routed("exp2", {}) == []
    assert vml_routed("pow", {"pow(0.5)": 1, "pow(2)": 3}) == ["pow(0.5)"] and vml_routed("rsqrt", {}) == []


def test_a_portable_step_and_an_evaluation_call_no_vml_routine(tmp_path: Path) -> None:
    """One training step (rollout, teacher scoring, credit, update) and an evaluation (its own process) of a tiny
    run in the portable mode, every ATen op on a float CPU tensor recorded (tests/vml_scan/sitecustomize.py)."""
    root, scan = project(tmp_path), tmp_path / "scan"
    scan.mkdir()
    env = {
        **os.environ,
        **environment("portable"),
        "GROPD_VML_SCAN": str(scan),
        "PYTHONPATH": os.pathsep.join([str(REPO / "tests" / "vml_scan"), str(REPO)]),
    }
    command = [sys.executable, "-m", "gropd.cli", "run", "table1__I32nothink-I1.7nothink__gropd", "--profile", "tiny"]
    command += ["train.steps=1", "eval.questions=2", "eval.suites=[add]", "backend.threads=1"]
    done = subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    records = [json.loads(path.read_text()) for path in scan.glob("*.json")]
    by_command = {next(word for word in record["argv"] if word in ("run", "evaluate")): record for record in records}
    assert set(by_command) == {"run", "evaluate"}  # training and its evaluation, each in its own process
    assert {"_fused_adamw_", "multinomial", "mm", "_log_softmax"} <= set(by_command["run"]["calls"])
    assert {"multinomial", "linear"} <= set(by_command["evaluate"]["calls"])
    for name, record in by_command.items():
        reached = [hit for op in record["calls"] for hit in vml_routed(op, record["pow"])]
        assert not reached, f"the portable {name} process called ops that reach MKL's vector math: {reached}"


def test_the_vml_free_routes_agree_with_torch_to_float_rounding(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vector_math, "VML_FREE", True)
    x = torch.linspace(-20.0, 5.0, 10001)
    exact = torch.exp(x.double())
    assert ((vector_math.exp(x).double() - exact).abs() / exact).max() < 4e-6  # x·log2 e rounds: ≤ |x|·2^-24
    assert vector_math.exp(torch.zeros(3)).tolist() == [1.0, 1.0, 1.0]
    v = torch.linspace(0.0, 50.0, 10001, dtype=torch.float64)
    assert ((vector_math.sqrt(v) - torch.sqrt(v)).abs() <= 4 * torch.finfo(torch.float64).eps * v.sqrt()).all()
    assert vector_math.sqrt(torch.tensor([0.0, 4.0, 2.25])).tolist() == [0.0, 2.0, 1.5]
    y = torch.tensor([0.3, -1.2], requires_grad=True)
    vector_math.exp(y).sum().backward()  # d/dy e^y = e^y
    assert torch.allclose(y.grad, torch.exp(y.detach()), rtol=1e-6)


def test_the_torch_routes_are_torch_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vector_math, "VML_FREE", False)
    x = torch.linspace(-3.0, 3.0, 101)
    assert torch.equal(vector_math.exp(x), torch.exp(x)) and torch.equal(vector_math.sqrt(x.abs()), x.abs().sqrt())


@pytest.mark.parametrize("head_dim", [24, 26])  # the tiny world's heads (hidden 96 and 104, 4 heads each)
def test_the_rotary_table_gives_transformers_cos_and_sin_to_float_rounding(head_dim: int) -> None:
    config = Qwen3Config(
        hidden_size=4 * head_dim, num_attention_heads=4, head_dim=head_dim, max_position_embeddings=512
    )
    rotary = Qwen3RotaryEmbedding(config)
    table = RotaryTable(rotary, config.max_position_embeddings)
    x, positions = torch.zeros(1, dtype=torch.float32), torch.tensor([[0, 1, 7, 300, 511]])
    cos, sin = table(x, positions)
    theirs_cos, theirs_sin = rotary(x, positions)
    assert cos.shape == theirs_cos.shape == (1, 5, head_dim)
    assert (cos - theirs_cos).abs().max() < 1e-6 and (sin - theirs_sin).abs().max() < 1e-6
    angle = 300 * 10000.0 ** (-2 / head_dim)  # position 300, second frequency, worked by hand
    assert math.isclose(cos[0, 3, 1].item(), math.cos(angle), abs_tol=2e-6)
    with pytest.raises(ValueError, match="position 512 is past the model's max_position_embeddings"):
        table(x, torch.tensor([[512]]))

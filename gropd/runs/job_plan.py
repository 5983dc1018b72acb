"""What a paper job asks of its node and how long its phases may take, derived from its plan: the host memory both
sbatch scripts request (`--mem`), the teacher server's time limit, each run's start-up deadline and collective
timeout (gropd/train/watchdog.py, gropd/train/world.py) and its evaluation's start-up deadline.
`python -m gropd.runs.job_plan` prints every figure with its derivation; tests/test_job_plan.py checks that the
scripts' #SBATCH lines hold them.

Host memory of a training job, one node of R ranks (the most any Table 1 run needs, so one array fits all):

    R × (PROCESS_GIB + E × ENGINE_GIB)    each trainer process (Python, torch, CUDA, NCCL) and the host side of its
                                          E vLLM engines (2 beside an in-process teacher, 1 beside a served one)
  + R × W × GRADER_GIB                    W math-verify workers a rank (eval/grading.py: min(CPUs, 8))
  + 12 B × N                              checkpoint staging: the N-parameter student's float32 masters and AdamW
                                          moments, every rank's shard in host memory as it is written
  + 6 B × N                               rank 0's float32 state dict of the final model and its bf16 copy
  then × (1 + MARGIN), up to a whole multiple of ROUND_GIB.

The teacher server's node (`vllm serve`, G GPUs): at most a worker and an engine core a GPU, and the API server,
(G × (PROCESS_GIB + ENGINE_GIB) + PROCESS_GIB) × (1 + MARGIN), rounded the same way. Page cache (the weights read
through it) is not counted: the kernel reclaims it before the cgroup's limit kills anything.

Times in seconds, with S the plan's longest step (gropd/runs/cost.py's high end), F = watchdog.FACTOR and A the
watchdog's allowance (the teacher wait, GROPD_TEACHER_WAIT_S, for a served teacher, else watchdog.ALLOWANCE_S):

    step deadline       F·S + A                                 the watchdog's rule (deadline_s) at the plan's step
    build               bytes read / READ_BYTES_PER_S + E × ENGINE_BUILD_S   weights (and a resumed checkpoint's 12 B
                                                                a parameter) from shared storage; each engine's
                                                                compilation, CUDA graphs and memory profile
    start-up deadline   build (+ the teacher wait when served) + step deadline     process start to step 1 done
    collective timeout  max(step deadline, build)               the longest one rank may spend between two
                                                                collectives while the others wait in one: a whole
                                                                step, or the engines' build (vLLM's engine start-up
                                                                runs collectives over every rank)
    evaluation          load + ENGINE_BUILD_S + F × waves × cap × DECODE_S_high + ALLOWANCE_S   its first (largest)
                                                                chunk, batch_prompts × the largest K rows
    server time limit   the longest served run's start-up deadline + steps × S, in whole hours (the server requeues
                        itself at its limit; the job that submits the array ends it when the array ends)
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Mapping
from dataclasses import dataclass

from gropd.config import load_manifests
from gropd.config.grids import expand_grid, load_grid
from gropd.config.manifests import Manifests
from gropd.config.resolve import resolve_run
from gropd.config.schema import RunConfig
from gropd.model.fit import GIB, PLANNED_GPU_BYTES
from gropd.runs.cost import DECODE_S, GPUS_A_NODE, PAPER_SHAPES, step_cost
from gropd.runs.lifecycle import models_of
from gropd.runs.preflight import architecture, engine_fit, engines_of
from gropd.train.watchdog import ALLOWANCE_S, FACTOR, RunLimits

PROCESS_GIB = 3.0  # a trainer process's host memory: Python, torch, the CUDA runtime, NCCL's buffers (ours)
ENGINE_GIB = 3.0  # an in-process vLLM engine's host side: tokenizer, scheduler, detokenizer, pinned buffers (ours)
GRADER_GIB = 0.25  # a math-verify worker process (Python and sympy, eval/grading.py; ours)
GRADERS_A_RANK = 8  # eval/grading.py's default: min(CPUs, 8) workers a rank (backend.threads unset)
CHECKPOINT_BYTES, FINAL_BYTES = 12, 4 + 2  # staged masters + AdamW moments; rank 0's float32 state dict + bf16 copy
MARGIN = 0.25
ROUND_GIB = 8
READ_BYTES_PER_S = 200e6  # a node reading the Hub cache or a checkpoint from shared storage (ours: a slow NFS)
ENGINE_BUILD_S = 300.0  # a vLLM engine's start-up: torch.compile, CUDA-graph capture, memory profile (ours)
WEIGHT_BYTES = 2  # bf16 weights on disk


@dataclass(frozen=True)
class HostMemory:
    """A job's host memory: each term (what, GiB) and the request, rounded (module docstring)."""

    terms: tuple[tuple[str, float], ...]

    def gib(self) -> int:
        """(Σ terms) × (1 + MARGIN), up to a whole multiple of ROUND_GIB."""
        return ROUND_GIB * math.ceil(sum(value for _, value in self.terms) * (1 + MARGIN) / ROUND_GIB)

    def describe(self) -> str:
        parts = " + ".join(f"{value:.1f} ({what})" for what, value in self.terms)
        return f"{parts} = {sum(v for _, v in self.terms):.1f} GiB, x {1 + MARGIN} -> {self.gib()} GiB"


def student_parameters(config: RunConfig, manifests: Manifests, shapes: Mapping | None = PAPER_SHAPES) -> int:
    """N, the run's student's parameter count (its config.json numbers, PAPER_SHAPES for the paper profile)."""
    return architecture(config, manifests, models_of(config, manifests)["student"][0], shapes).parameters()


def trainer_memory(config: RunConfig, manifests: Manifests, ranks: int = GPUS_A_NODE) -> HostMemory:
    """The host memory of `config`'s training job on one node of `ranks` ranks (module docstring)."""
    engines = 2 if config.backend.teacher == "vllm" else 1
    n = student_parameters(config, manifests)
    return HostMemory(
        (
            (f"{ranks} trainers with {engines} engine(s) each", ranks * (PROCESS_GIB + engines * ENGINE_GIB)),
            (f"{ranks * GRADERS_A_RANK} grading workers", ranks * GRADERS_A_RANK * GRADER_GIB),
            (f"checkpoint staging, {CHECKPOINT_BYTES} B x {n / 1e9:.2f} B parameters", CHECKPOINT_BYTES * n / GIB),
            (f"rank 0's float32 state dict and bf16 copy, {FINAL_BYTES} B a parameter", FINAL_BYTES * n / GIB),
        )
    )


def server_memory(gpus: int = GPUS_A_NODE) -> HostMemory:
    """The host memory of a teacher server's node of `gpus` GPUs (module docstring)."""
    return HostMemory(
        (
            (f"{gpus} vLLM workers and engine cores", gpus * (PROCESS_GIB + ENGINE_GIB)),
            ("the API server", PROCESS_GIB),
        )
    )


def step_deadline_s(config: RunConfig, manifests: Manifests, teacher_wait_s: float) -> float:
    """F·S + A: the watchdog's deadline at the plan's longest step (module docstring)."""
    served = config.backend.teacher == "server"
    return FACTOR * step_cost(config, manifests).seconds()[1] + (teacher_wait_s if served else ALLOWANCE_S)


def run_limits(config: RunConfig, manifests: Manifests, teacher_wait_s: float) -> RunLimits:
    """A paper training run's start-up deadline and collective timeout (module docstring); `teacher_wait_s`:
    GROPD_TEACHER_WAIT_S, counted where its teacher is served."""
    served = config.backend.teacher == "server"
    step = step_deadline_s(config, manifests, teacher_wait_s)
    roles = models_of(config, manifests)
    loaded = [roles["student"][0]] + ([] if served else [roles["teacher"][0]])
    weights = sum(WEIGHT_BYTES * architecture(config, manifests, label, PAPER_SHAPES).parameters() for label in loaded)
    read = weights + CHECKPOINT_BYTES * student_parameters(config, manifests)  # a resume reads its checkpoint too
    build = read / READ_BYTES_PER_S + (1 if served else 2) * ENGINE_BUILD_S
    return RunLimits(startup_s=build + (teacher_wait_s if served else 0.0) + step, collective_s=max(step, build))


def evaluation_startup_s(config: RunConfig, manifests: Manifests) -> float:
    """An evaluation shard's deadline from its start to its first (largest) chunk sampled and graded."""
    engine = next(e for e in engines_of(config, manifests, GPUS_A_NODE) if e.what == "evaluation engine")
    fit = engine_fit(config, manifests, engine, PLANNED_GPU_BYTES, engine.fraction, PAPER_SHAPES)
    prompts = min(config.eval.batch_prompts, config.eval.questions or config.eval.batch_prompts)
    rows = prompts * max(int(spec["k"]) for spec in manifests.suites[config.profile].values())
    cap = config.eval.sampling[models_of(config, manifests)["student"][1]].max_new_tokens
    chunk = fit.waves(rows) * cap * DECODE_S[1]
    load = WEIGHT_BYTES * student_parameters(config, manifests) / READ_BYTES_PER_S
    return load + ENGINE_BUILD_S + FACTOR * chunk + ALLOWANCE_S


def grid_runs(manifests: Manifests, grid: str, overrides: tuple[str, ...] = ()) -> list[RunConfig]:
    """The paper profile's training runs of `grid`, as their grid entries resolve (with `overrides`)."""
    entries = expand_grid(load_grid(grid, manifests.root))
    configs = [resolve_run(None, "paper", manifests, list(overrides), entry_values=entry.values) for entry in entries]
    return [config for config in configs if config.kind == "train"]


def table1(manifests: Manifests) -> list[RunConfig]:
    """The paper profile's Table 1 training runs."""
    return grid_runs(manifests, "table1")


SMOKE = ("train.steps=2", "train.checkpoint_every=1", "eval.questions=1")  # a checkpoint each step, 1 question a suite


def submission(manifests: Manifests, grid: str, teacher_wait_s: float) -> list[str]:
    """What experiments/launch/submit_grid.sh submits before `grid`'s array, a line each: `settings` and SMOKE;
    `server LABEL` for each teacher its runs score through a server; `smoke RUN_ID H:MM:SS LABEL` for its first run
    of each teacher kind (in-process, served), with SMOKE's settings, the time limit their plan derives (the start-up
    deadline, step 1 included, one more step's deadline and the evaluation's start-up deadline, its first chunk, in
    whole minutes) and its served teacher's label (`-` for an in-process one)."""
    lines = ["settings " + " ".join(SMOKE)]
    for config in grid_runs(manifests, grid):
        if config.backend.teacher == "server" and f"server {models_of(config, manifests)['teacher'][0]}" not in lines:
            lines.append(f"server {models_of(config, manifests)['teacher'][0]}")
    kinds: dict[str, RunConfig] = {}
    for config in grid_runs(manifests, grid, SMOKE):
        kinds.setdefault(config.backend.teacher, config)
    for config in kinds.values():
        step = step_deadline_s(config, manifests, teacher_wait_s)
        minutes = math.ceil((run_limits(config, manifests, teacher_wait_s).startup_s + step) / 60)
        minutes += math.ceil(evaluation_startup_s(config, manifests) / 60)
        label = models_of(config, manifests)["teacher"][0] if config.backend.teacher == "server" else "-"
        lines.append(f"smoke {config.run_id} {minutes // 60}:{minutes % 60:02d}:00 {label}")
    return lines


def job_memory_gib(manifests: Manifests) -> tuple[int, str]:
    """(GiB, derivation) slurm_run.sbatch requests: the most any Table 1 run's job needs."""
    memory = max((trainer_memory(config, manifests) for config in table1(manifests)), key=HostMemory.gib)
    return memory.gib(), memory.describe()


def server_hours(manifests: Manifests, teacher_wait_s: float) -> tuple[int, str]:
    """(hours, derivation) of teacher_server.sh's time limit: the longest served Table 1 run (module docstring)."""

    def seconds(c: RunConfig) -> float:
        return run_limits(c, manifests, teacher_wait_s).startup_s + c.train.steps * step_cost(c, manifests).seconds()[1]

    config = max((c for c in table1(manifests) if c.backend.teacher == "server"), key=seconds)
    seconds = seconds(config)
    text = f"{config.run_id}: start-up deadline + {config.train.steps} steps x its longest step, {seconds:.0f} s"
    return math.ceil(seconds / 3600), text


def main(argv: list[str] | None = None) -> int:
    """`python -m gropd.runs.job_plan`: the figures the launch scripts carry, with their derivations."""
    from gropd.model.components import TEACHER_WAIT_S

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--submit", metavar="GRID", help="what submit_grid.sh submits before GRID's array")
    args = parser.parse_args(argv)
    manifests = load_manifests()
    if args.submit:
        print("\n".join(submission(manifests, args.submit, TEACHER_WAIT_S)))
        return 0
    gib, how = job_memory_gib(manifests)
    print(f"slurm_run.sbatch --mem={gib}G: {how}")
    print(f"teacher_server.sh --mem={server_memory().gib()}G: {server_memory().describe()}")
    hours, how = server_hours(manifests, TEACHER_WAIT_S)
    print(f"teacher_server.sh --time={hours}:00:00: {how}")
    for config in table1(manifests):
        limits = run_limits(config, manifests, TEACHER_WAIT_S)
        print(
            f"{config.run_id}: start-up deadline {limits.startup_s:.0f} s, collective timeout "
            f"{limits.collective_s:.0f} s, evaluation start-up {evaluation_startup_s(config, manifests):.0f} s"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

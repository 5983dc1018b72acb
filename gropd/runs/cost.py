"""What a grid costs on GPUs, an estimate from its plan (the README's cost table is this module's output:
`python -m gropd.runs.cost`, and tests/test_cost.py checks that they agree).

Each run of the grid resolves as `grid` would run it (its grid entry in the paper profile) on one node of
GPUS_A_NODE GPUs, one data-parallel rank a GPU (R rows a rank, cap C tokens, prompts of PROMPT_TOKENS). Two
scenarios bound a step:

    low    responses of MEAN_RESPONSE tokens, the longest reaching the cap; every rank's rows alike (no wait)
    high   the collapse rule's edge: a share p = collapse.len_cap_fraction of responses at the cap (more, for
           len_cap_patience batches, stops the run), the others of MEAN_RESPONSE tokens

A step, in seconds:

    rollout    = waves · C · DECODE_S         waves: 1 (low); the rank's ⌈p·R⌉ long rows in fit.py's `waves` at
                                              the pairing's GPU share (high)
    update     = Σ micro-steps of the slowest rank: FSDP2 runs each micro-step as collectives, so every rank waits
                 for the rank whose rows are longest. ⌈R / per_device_batch⌉ micro-steps, each
                 micro(rows · tokens) with micro linear through MICRO_S's two measured points; high: a micro-step
                 holds a row at the cap on some rank with chance q = 1 − (1 − p)^ranks, so it costs
                 q · micro(cap row) + (1 − q) · micro(mean row)
    recompute  = RECOMPUTE_SHARE · update     (π_S,old: the same tokens, forward only, evened out the same way)
    sync       = SYNC_S                       (the weight sync into the rollout engine)
    teacher    in-process: the rank's R rows of tokens / TEACHER_4B_TOKENS_S (prefill with prompt log-probs)
               served: the run's ranks · R rows of tokens (~1.2 M at the low end) / SERVER_TOKENS_S, the server
               node's prefill rate. n runs share it (every served run of the grid at once: high; one: low), and a
               shared server turns the bottleneck when n runs' scoring outlasts one run's step:
                   step = max(others + W / rate, n · W / rate)       (W: a step's teacher tokens)

A run costs steps · step / 3600 hours × GPUS_A_NODE GPU-hours. Besides training:

    server      the served teacher's node (GPUS_A_NODE GPUs) for as long as its longest run, the runs at once
    evaluation  each trained run, in GPUS_A_NODE shards: Σ_suites questions · K · the suite's expected_tokens
                (suites.yaml) · EVAL_LENGTH_SHARE tokens, decoded at (sequences the evaluation engine's KV cache
                holds at that length, fit.py, at most SAMPLER_ROWS) / DECODE_S tokens a second a GPU
    start-ups   START_S a node for each training run, evaluation and server start (models loaded, engines built,
                CUDA graphs captured)

The paper checkpoints' shapes are their config.json numbers (PAPER_SHAPES: the run itself reads its checkpoint's).
The rates are assumptions (printed under the table) until benchmarks/gpu_check.py measures them on the cluster.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from pathlib import Path

from eval.suites import load_suite_manifest
from gropd.config import load_manifests
from gropd.config.grids import expand_grid, load_grid
from gropd.config.manifests import Manifests
from gropd.config.resolve import resolve_run
from gropd.config.schema import RunConfig
from gropd.model.fit import GIB, PLANNED_GPU_BYTES, SAMPLER_ROWS
from gropd.runs.preflight import engine_fit, engines_of, with_gpu_split
from gropd.train.world import rank_share

GPUS_A_NODE = 8
PROMPT_TOKENS = 256  # ours: a training or evaluation prompt, rendered (competition problems run 50-400 tokens)
MEAN_RESPONSE = 2048  # ours: a response's mean length in tokens below the cap (the cap is 8,192)
DECODE_S = (0.003, 0.005)  # a decode step of the 1.7B student at <= 64 sequences on an H100
MICRO_S = ((2048, 0.3), (8192, 0.8))  # (row tokens, s): forward + backward of one row (gpu_check's update, an H200)
RECOMPUTE_SHARE = (0.25, 0.33)  # a no-grad forward's share of forward + backward (checkpointing: backward redoes it)
SYNC_S = (2.0, 4.0)  # the weight sync into the rollout engine
TEACHER_4B_TOKENS_S = (30_000, 15_000)  # prefill + prompt log-probs of the 4B teacher at its share of an H100
SERVER_TOKENS_S = (60_000, 30_000)  # the 32B server node's prefill + prompt log-probs (8 H100s: 7.5k-3.75k a GPU)
EVAL_LENGTH_SHARE = (0.5, 1.0)  # the student's evaluation responses against suites.yaml's expected_tokens
START_S = (180.0, 600.0)  # one process start on a node: models loaded, vLLM engines built, CUDA graphs captured
HUB_QUESTIONS = {"olympiadbench": 675}  # a suite used whole, not at its paper count (suites.yaml: no `ids`)
ASSUMPTIONS = (
    f"prompts of {PROMPT_TOKENS} tokens, responses of {MEAN_RESPONSE:,} tokens below the cap; a decode step "
    f"{DECODE_S[0] * 1000:.0f}-{DECODE_S[1] * 1000:.0f} ms; a micro-step (forward + backward of one row) "
    f"{MICRO_S[0][1]} s at {MICRO_S[0][0]:,} tokens and {MICRO_S[1][1]} s at {MICRO_S[1][0]:,}, linear; the "
    f"π_S,old recompute {RECOMPUTE_SHARE[0]:.2f}-{RECOMPUTE_SHARE[1]:.2f} of the update; weight sync "
    f"{SYNC_S[0]:.0f}-{SYNC_S[1]:.0f} s; the 4B teacher {TEACHER_4B_TOKENS_S[0] // 1000}k-"
    f"{TEACHER_4B_TOKENS_S[1] // 1000}k tokens/s a GPU, the 32B server {SERVER_TOKENS_S[0] // 1000}k-"
    f"{SERVER_TOKENS_S[1] // 1000}k tokens/s a node; evaluation responses {EVAL_LENGTH_SHARE[0]}-"
    f"{EVAL_LENGTH_SHARE[1]} of suites.yaml's expected_tokens; a start-up {START_S[0] / 60:.0f}-"
    f"{START_S[1] / 60:.0f} min a node"
)
QWEN3 = {"vocab_size": 151936, "num_key_value_heads": 8, "head_dim": 128}
PAPER_SHAPES = {  # config.json of the paper checkpoints (models.yaml), the numbers gropd/model/fit.py reads
    "I1.7": QWEN3 | {"hidden_size": 2048, "num_hidden_layers": 28, "intermediate_size": 6144},
    "I4": QWEN3 | {"hidden_size": 2560, "num_hidden_layers": 36, "intermediate_size": 9728},
    "I32": QWEN3 | {"hidden_size": 5120, "num_hidden_layers": 64, "intermediate_size": 25600},
}
PAPER_SHAPES["I1.7"] |= {"num_attention_heads": 16, "tie_word_embeddings": True}
PAPER_SHAPES["I4"] |= {"num_attention_heads": 32, "tie_word_embeddings": True}
PAPER_SHAPES["I32"] |= {"num_attention_heads": 64, "tie_word_embeddings": False}
PAPER_SHAPES |= {"B1.7": PAPER_SHAPES["I1.7"], "B4": PAPER_SHAPES["I4"]}  # the Base checkpoints: the same shapes


def micro_step_s(tokens: float) -> float:
    """Forward + backward of `tokens` row tokens: linear through MICRO_S's two points."""
    (t0, s0), (t1, s1) = MICRO_S
    return s0 + (tokens - t0) * (s1 - s0) / (t1 - t0)


@dataclass(frozen=True)
class StepCost:
    """One training run's step: its settings and the (low, high) seconds of a step (module docstring)."""

    pairing: str
    steps: int
    cap: int
    rollout_share: float
    teacher_share: float | None  # None: a served teacher
    ranks: int
    sequences: int  # R, the rank's rows of a rollout batch
    waves: int  # the rollout's waves at the high end
    micro_steps: int
    rows_a_micro_step: int
    cap_share: float  # p, collapse.len_cap_fraction
    sharing: int = 1  # the runs of the grid that share a served teacher at the high end

    def mean_row(self, high: bool) -> float:
        """A row's tokens in a scenario: prompt + mean response (high: p of them at the cap)."""
        response = self.cap_share * self.cap + (1 - self.cap_share) * MEAN_RESPONSE if high else MEAN_RESPONSE
        return PROMPT_TOKENS + response

    def update_s(self, high: bool) -> float:
        """The micro-steps, each waiting for its slowest rank (module docstring)."""
        typical = micro_step_s(self.rows_a_micro_step * (PROMPT_TOKENS + MEAN_RESPONSE))
        if not high:
            return self.micro_steps * typical
        longest = micro_step_s(self.rows_a_micro_step * (PROMPT_TOKENS + self.cap))
        q = 1 - (1 - self.cap_share) ** self.ranks
        return self.micro_steps * (q * longest + (1 - q) * typical)

    def teacher_tokens(self, high: bool) -> float:
        """W: the tokens a step's teacher scores (served: every rank's rows; in-process: this rank's)."""
        rows = self.sequences * (self.ranks if self.teacher_share is None else 1)
        return rows * self.mean_row(high)

    def scenario_s(self, high: bool) -> float:
        """One step's seconds in a scenario (module docstring)."""
        k = int(high)
        rollout = (self.waves if high else 1) * self.cap * DECODE_S[k]
        update = self.update_s(high)
        others = rollout + update * (1 + RECOMPUTE_SHARE[k]) + SYNC_S[k]
        if self.teacher_share is not None:
            return others + self.teacher_tokens(high) / TEACHER_4B_TOKENS_S[k]
        alone = self.teacher_tokens(high) / SERVER_TOKENS_S[k]
        return max(others + alone, (self.sharing if high else 1) * alone)

    def seconds(self) -> tuple[float, float]:
        return self.scenario_s(False), self.scenario_s(True)

    def gpu_hours(self) -> tuple[float, float]:
        low, high = self.seconds()
        return tuple(self.steps * s / 3600 * GPUS_A_NODE for s in (low, high))


def step_cost(config: RunConfig, manifests: Manifests, gpu_bytes: int = PLANNED_GPU_BYTES) -> StepCost:
    """The step of a training run on one node of a `gpu_bytes` card (module docstring), its engines at fit.py's
    split of that card where its config leaves them null (with_gpu_split)."""
    config = with_gpu_split(config, manifests, gpu_bytes, GPUS_A_NODE, True, PAPER_SHAPES)
    share = rank_share(config.train, GPUS_A_NODE)
    engines = engines_of(config, manifests, GPUS_A_NODE)
    rollout = next(engine for engine in engines if engine.what == "rollout engine")
    fit = engine_fit(config, manifests, rollout, gpu_bytes, rollout.fraction, PAPER_SHAPES)
    p = config.collapse.len_cap_fraction
    return StepCost(
        pairing=config.pairing,
        steps=config.train.steps,
        cap=config.sampling.max_new_tokens,
        rollout_share=config.backend.rollout_gpu_fraction,
        teacher_share=config.backend.teacher_gpu_fraction if config.backend.teacher == "vllm" else None,
        ranks=GPUS_A_NODE,
        sequences=share.responses,
        waves=fit.waves(math.ceil(p * share.responses)),
        micro_steps=math.ceil(share.responses / config.train.per_device_batch),
        rows_a_micro_step=config.train.per_device_batch,
        cap_share=p,
    )


def evaluation_s(config: RunConfig, manifests: Manifests, gpu_bytes: int = PLANNED_GPU_BYTES) -> tuple[float, float]:
    """(low, high) seconds of a trained run's evaluation in GPUS_A_NODE shards (module docstring)."""
    engine = next(e for e in engines_of(config, manifests, GPUS_A_NODE) if e.what == "evaluation engine")
    fit = engine_fit(config, manifests, engine, gpu_bytes, engine.fraction, PAPER_SHAPES)
    kv_tokens = (fit.budget - fit.weights - fit.workspace) / (fit.kv / engine.context)
    cap = engine.context - config.backend.max_prompt_tokens
    seconds = []
    for k, share in enumerate(EVAL_LENGTH_SHARE):
        total = 0.0
        for name, spec in load_suite_manifest(manifests.root / "suites.yaml", "paper").items():
            length = min(cap, share * spec.expected_tokens)
            samples = HUB_QUESTIONS.get(name, spec.paper_questions) * spec.k / GPUS_A_NODE
            at_once = min(SAMPLER_ROWS, max(1, int(kv_tokens // (PROMPT_TOKENS + length))))
            total += samples * length / at_once * DECODE_S[k]
        seconds.append(total)
    return seconds[0], seconds[1]


@dataclass(frozen=True)
class GridCost:
    """A grid's training runs, and its other GPU-hours (low, high): the served teacher's node, evaluation,
    start-ups."""

    runs: list[StepCost]
    server: tuple[float, float]
    evaluation: tuple[float, float]
    startups: tuple[float, float]
    starts: int

    def total(self) -> tuple[float, float]:
        parts = [self.server, self.evaluation, self.startups] + [run.gpu_hours() for run in self.runs]
        return sum(p[0] for p in parts), sum(p[1] for p in parts)


def grid_costs(manifests: Manifests, grid: str) -> GridCost:
    """Each training run of `grid` in the paper profile, as its grid entry resolves, and the rest it costs."""
    entries = expand_grid(load_grid(grid, manifests.root))
    configs = [resolve_run(None, "paper", manifests, [], entry_values=entry.values) for entry in entries]
    trained = [config for config in configs if config.kind == "train"]
    served = sum(config.backend.teacher == "server" for config in trained)
    runs = [
        StepCost(**{**vars(cost), "sharing": max(1, served) if cost.teacher_share is None else 1})
        for cost in (step_cost(config, manifests) for config in trained)
    ]
    longest = [
        max((run.steps * run.seconds()[k] for run in runs if run.teacher_share is None), default=0) for k in (0, 1)
    ]
    evals = [evaluation_s(config, manifests) for config in trained]
    starts = 2 * len(trained) + (served > 0)
    return GridCost(
        runs=runs,
        server=tuple(s / 3600 * GPUS_A_NODE for s in longest),
        evaluation=tuple(sum(e[k] for e in evals) / 3600 * GPUS_A_NODE for k in (0, 1)),
        startups=tuple(starts * s / 3600 * GPUS_A_NODE for s in START_S),
        starts=starts,
    )


def _span(pair: tuple[float, float], digits: int = 0) -> str:
    return f"{pair[0]:.{digits}f}-{pair[1]:.{digits}f}"


def cost_table(cost: GridCost, grid: str, gpu_bytes: int = PLANNED_GPU_BYTES) -> str:
    """The Markdown table of `cost`: its training runs by pairing, the server, evaluation, start-ups and total,
    with the assumptions under it."""
    rows = [
        f"| pairing (`{grid}`) | runs | steps | GPU split (rollout / teacher) | rollout waves (high) | step (s) | "
        f"hours a run | GPU-hours |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for pairing in dict.fromkeys(run.pairing for run in cost.runs):
        runs = [run for run in cost.runs if run.pairing == pairing]
        first = runs[0]
        low, high = first.seconds()
        hours = tuple(sum(run.gpu_hours()[k] for run in runs) for k in (0, 1))
        teacher = "served" if first.teacher_share is None else f"{first.teacher_share:.2f}"
        rows.append(
            f"| {pairing} | {len(runs)} | {first.steps} | {first.rollout_share:.2f} / {teacher} | {first.waves} "
            f"({math.ceil(first.cap_share * first.sequences)} of {first.sequences} rows at {first.cap} tokens) | "
            f"{low:.0f}-{high:.0f} | {_span((first.steps * low / 3600, first.steps * high / 3600), 1)} | "
            f"{_span(hours)} |"
        )
    served = [run for run in cost.runs if run.teacher_share is None]
    if served:
        rows.append(f"| the 32B teacher server's node | {len(served)} at once | | | | | | {_span(cost.server)} |")
    rows.append(f"| evaluation ({GPUS_A_NODE} shards a run) | {len(cost.runs)} | | | | | | {_span(cost.evaluation)} |")
    rows.append(f"| start-ups | {cost.starts} | | | | | | {_span(cost.startups)} |")
    rows.append(f"| all | {len(cost.runs)} | | | | | | {_span(cost.total())} |")
    sharing = max((run.sharing for run in served), default=1)
    scenarios = (
        f"One node of {GPUS_A_NODE} GPUs of {gpu_bytes / GIB:.0f} GiB a run, one rank a GPU. A step's low end: "
        f"responses of {MEAN_RESPONSE:,} tokens, the longest reaching the cap, every rank's rows alike; its high end "
        "the collapse rule's edge: collapse.len_cap_fraction of the responses at the cap (more, for len_cap_patience "
        "batches, stops the run), the rollout in its waves, and each FSDP2 micro-step waiting for the slowest rank's "
        "row (at the cap on some rank with chance 1 - (1 - p)^ranks)."
    )
    if served:
        low, high = (served[0].teacher_tokens(h) / 1e6 for h in (False, True))
        scenarios += (
            f" A served 32B teacher scores every rank's rows ({low:.1f}-{high:.1f} M tokens a step), alone at the "
            f"low end and shared by the grid's {sharing} served runs at once at the high end, where it turns the "
            "bottleneck once their scoring outlasts a step (step = max(own step, runs x scoring))."
        )
    others = (
        f"The server's node counts while its longest run trains; each trained run is evaluated in {GPUS_A_NODE} "
        "shards; start-ups: each training run, evaluation and server starts once (resumes not counted). Assumed "
        f"rates: {ASSUMPTIONS}. gropd/runs/cost.py has the formulas; benchmarks/gpu_check.sh prints a GPU's real "
        "rates to replace the assumed ones."
    )
    return "\n".join(rows + ["", scenarios + " " + others]) + "\n"


def main(argv: list[str] | None = None) -> int:
    """`python -m gropd.runs.cost [--grid table1]`: the grid's GPU cost as a Markdown table (README's)."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--grid", default="table1")
    args = parser.parse_args(argv)
    manifests = load_manifests(Path("experiments"))
    print(cost_table(grid_costs(manifests, args.grid), args.grid), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

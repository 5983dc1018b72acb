"""What a grid's training costs on GPUs, an estimate from its plan (the README's cost table is this module's
output: `python -m gropd.runs.cost`, and tests/test_cost.py checks that they agree).

Each run of the grid resolves as `grid` would run it (its grid entry in the paper profile) on one node of
GPUS_A_NODE GPUs. Its step, in seconds, as a range (low: the longest response reaches the cap; high: every response
runs long):

    rollout    = cap · DECODE_S                      (low: one response decodes to the cap)
               = waves · cap · DECODE_S              (high: a rank's batch in fit.py's `waves` at its GPU share)
    update     = micro-steps · MICRO_STEP_S          (a rank's responses / train.per_device_batch)
    + SYNC_S + TEACHER_S + RECOMPUTE_S               (weight sync, teacher scoring, π_S,old recompute)

and a run costs steps · step / 3600 hours on its node, × GPUS_A_NODE GPU-hours. The paper checkpoints' shapes are
their config.json numbers (PAPER_SHAPES: the run itself reads its checkpoint's); evaluation and the 32B teacher
server's node are not counted. The rates are assumptions (ASSUMPTIONS, printed under the table) until
benchmarks/gpu_check.py measures them on the cluster's GPUs.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from gropd.config import load_manifests
from gropd.config.grids import expand_grid, load_grid
from gropd.config.manifests import Manifests
from gropd.config.resolve import resolve_run
from gropd.config.schema import RunConfig
from gropd.model.fit import GIB, PLANNED_GPU_BYTES
from gropd.runs.preflight import engine_fit, engines_of
from gropd.train.world import rank_share

GPUS_A_NODE = 8
DECODE_S = (0.003, 0.005)  # a decode step of the 1.7B student at <= 64 sequences on an H100
MICRO_STEP_S = (0.3, 0.8)  # a forward + backward of one response (gpu_check's update phase on an H200: 2k-8k tokens)
SYNC_S = (2.0, 4.0)  # the weight sync into the rollout engine
TEACHER_S = (3.0, 15.0)  # scoring a rank's responses (a 4B in-process, or its share of the 32B server)
RECOMPUTE_S = (2.0, 8.0)  # the old-policy log-probs' no-grad forwards
ASSUMPTIONS = (
    f"a decode step {DECODE_S[0] * 1000:.0f}-{DECODE_S[1] * 1000:.0f} ms, a micro-step (forward + backward of one "
    f"response) {MICRO_STEP_S[0]}-{MICRO_STEP_S[1]} s, weight sync {SYNC_S[0]:.0f}-{SYNC_S[1]:.0f} s, teacher "
    f"{TEACHER_S[0]:.0f}-{TEACHER_S[1]:.0f} s, recompute {RECOMPUTE_S[0]:.0f}-{RECOMPUTE_S[1]:.0f} s a step"
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


@dataclass(frozen=True)
class StepCost:
    """One run's step: its settings and the (low, high) seconds of a step."""

    pairing: str
    steps: int
    cap: int
    rollout_share: float
    teacher_share: float | None
    sequences: int
    waves: int
    micro_steps: int

    def seconds(self) -> tuple[float, float]:
        low = self.cap * DECODE_S[0] + self.micro_steps * MICRO_STEP_S[0] + SYNC_S[0] + TEACHER_S[0] + RECOMPUTE_S[0]
        high = self.waves * self.cap * DECODE_S[1] + self.micro_steps * MICRO_STEP_S[1]
        return low, high + SYNC_S[1] + TEACHER_S[1] + RECOMPUTE_S[1]

    def gpu_hours(self) -> tuple[float, float]:
        low, high = self.seconds()
        return tuple(self.steps * s / 3600 * GPUS_A_NODE for s in (low, high))


def step_cost(config: RunConfig, manifests: Manifests, gpu_bytes: int = PLANNED_GPU_BYTES) -> StepCost:
    """The step of a training run on one node of a `gpu_bytes` card (module docstring)."""
    share = rank_share(config.train, GPUS_A_NODE)
    engines = engines_of(config, manifests, GPUS_A_NODE)
    rollout = next(engine for engine in engines if engine.what == "rollout engine")
    fit = engine_fit(config, manifests, rollout, gpu_bytes, rollout.fraction, PAPER_SHAPES)
    return StepCost(
        pairing=config.pairing,
        steps=config.train.steps,
        cap=config.sampling.max_new_tokens,
        rollout_share=config.backend.rollout_gpu_fraction,
        teacher_share=config.backend.teacher_gpu_fraction if config.backend.teacher == "vllm" else None,
        sequences=share.responses,
        waves=fit.waves(share.responses),
        micro_steps=math.ceil(share.responses / config.train.per_device_batch),
    )


def grid_costs(manifests: Manifests, grid: str) -> list[StepCost]:
    """Each training run of `grid` in the paper profile, as its grid entry resolves."""
    entries = expand_grid(load_grid(grid, manifests.root))
    configs = [resolve_run(None, "paper", manifests, [], entry_values=entry.values) for entry in entries]
    return [step_cost(config, manifests) for config in configs if config.kind == "train"]


def cost_table(costs: Sequence[StepCost], grid: str, gpu_bytes: int = PLANNED_GPU_BYTES) -> str:
    """The Markdown table of `costs` by pairing, its total and the assumptions under it."""
    rows = [
        f"| pairing (`{grid}`) | runs | steps | GPU split (rollout / teacher) | rollout waves | step (s) | "
        f"hours a run | GPU-hours |",
        "|---|---|---|---|---|---|---|---|",
    ]
    total = [0.0, 0.0]
    for pairing in dict.fromkeys(cost.pairing for cost in costs):
        runs = [cost for cost in costs if cost.pairing == pairing]
        first = runs[0]
        low, high = first.seconds()
        hours = [sum(cost.gpu_hours()[k] for cost in runs) for k in (0, 1)]
        total = [total[0] + hours[0], total[1] + hours[1]]
        teacher = "served" if first.teacher_share is None else f"{first.teacher_share:.2f}"
        rows.append(
            f"| {pairing} | {len(runs)} | {first.steps} | {first.rollout_share:.2f} / {teacher} | {first.waves} "
            f"({first.sequences} rows of {first.cap} tokens) | {low:.0f}-{high:.0f} | "
            f"{first.steps * low / 3600:.1f}-{first.steps * high / 3600:.1f} | {hours[0]:.0f}-{hours[1]:.0f} |"
        )
    rows.append(f"| all | {len(costs)} | | | | | | {total[0]:.0f}-{total[1]:.0f} |")
    notes = [
        "",
        f"One node of {GPUS_A_NODE} GPUs of {gpu_bytes / GIB:.0f} GiB a run; a step's range runs from the longest "
        "response reaching the cap (in one wave) to every response running long (the rollout in its waves). "
        f"Assumed rates: {ASSUMPTIONS}. Evaluation and the 32B teacher server's node are not counted.",
    ]
    return "\n".join(rows + notes) + "\n"


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

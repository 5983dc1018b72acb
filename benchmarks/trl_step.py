"""Seconds per rollout batch (128 responses) of our vanilla-OPD step next to TRL's DistillationTrainer on the
same tiny work, alternating in one process, and the ratio ours/TRL (the goal: <= 0.6).

    python benchmarks/trl_step.py [--rounds 3] [--steps 6]

Each round runs TRL for 1 + `steps` rollout batches, then ours for 1 + `steps` (both from freshly loaded
checkpoints, the first batch of each dropped as warm-up), so the two sides see the same machine state in
turn. One thread (torch.set_num_threads(1), as the tiny profile's backend.threads), float32, CPU,
transformers generation (no vLLM). TRL is a dev dependency (requirements-dev.txt), not a runtime one.

The work (the tiny profile, experiments/profiles/tiny.yaml over experiments/train.yaml, run
table1__I4nothink-I1.7nothink__opd): student I1.7, teacher I4, both prompted in nothink mode (the
chat template with enable_thinking=False, templates.render_prompt); the first prompts of our training
pool in our sampler's order (PromptSampler, seed 0: both sides see the same prompts, batch for batch);
16 prompts x 8 responses = 128 per rollout batch, two optimiser steps of 64 responses (8 prompts) each;
temperature 1.0, top_p 1.0, no top-k, at most 200 new tokens, stop at <|im_end|> or <|endoftext|>;
AdamW (lr 2e-4, betas 0.9/0.999, eps 1e-8, no weight decay) with the linear schedule of 10 warm-up
updates to a floor of 0.1 (TRL gets the very optimiser and LambdaLR that gropd.train.loop.make_optimizer
builds for the same number of rollout batches), gradient clipping at 1.0, no gradient checkpointing.

TRL side: `trl.DistillationTrainer` + `trl.DistillationConfig` (trl 1.16.0; promoted out of
trl.experimental, which keeps a deprecated alias; the older SFT-based trl.experimental.gkd.GKDTrainer,
with its lmbda, and trl.experimental.iw_opd, an importance-weighted objective, are not used). It is
purely on-policy by design: every completion is sampled from the student (there is no lmbda /
student-data fraction to set; the fraction is 1). Loss: `beta=1.0`, its generalised JSD at beta = 1, i.e. the reverse KL
KL(pi_S || pi_T) per completion position over the full vocabulary at temperature 1, averaged over the
batch's completion tokens. That is the loss closest to vanilla OPD that TRL offers: OPD's advantage
A_t = f_t = log pi_T(y_t) - log pi_S,old(y_t) in a policy-gradient surrogate is the sampled-token
estimate of the same reverse KL's gradient, and TRL has no sampled-token OPD loss (its `beta` only picks
the divergence). TRL has no notion of G responses per prompt (distillation is n = 1), so each prompt is
repeated 8 times in the dataset, consecutively, with shuffle_dataset=False: one TRL generation batch of
64 rows is then 8 prompts x 8, as our minibatch is. per_device_train_batch_size=64 and
gradient_accumulation_steps=1 (as our tiny per_device_batch 64, grad_accum 1): one TRL optimiser step
consumes 64 responses, and "one step" as we count it (128 responses) is two TRL optimiser steps. The
prompts are given as text already rendered by our template (TRL tokenises them with the tokenizer's
plain call, checked here to give exactly PromptRenderer's ids); the student's generation_config ends
completions on the same two stop tokens.

Differences that remain (TRL's design, not settings):
- TRL samples 64 completions per generate call, once per optimiser step, each from the weights of that
  moment; ours samples the 128 of a rollout batch in one call and takes two PPO-clipped updates from it
  (the second on a batch one update old). Per 128 responses TRL makes two generate calls to our one.
- Loss: TRL's analytic full-vocabulary reverse KL (student and teacher forward over prompt + completion
  inside each micro-batch) vs our sampled-token surrogate (teacher scored once per rollout batch, a
  group's prompt forwarded once for its 8 responses, π_S,old from the sampler: no extra forward).
- Sampling: transformers' generate (left-padded batch, runs until every row has stopped) vs our
  KV-cached loop (prompts prefilled once per group, finished rows compacted); different random streams,
  so the sampled responses (and their lengths, printed) differ.
- Ours also grades every response with the verifier (math-verify; monitoring, not used by OPD) and
  writes metrics / TensorBoard / status each step; TRL here grades nothing and reports nowhere
  (report_to none, its metrics averaged every 2 optimiser steps). Our grader starts its math-verify worker
  pool at the first response its fast path cannot judge (about 2 s, once per run, in whichever batch
  that happens): the medians keep that spike out, the max shows it.

Timing. Ours: wall time per rollout batch, between consecutive metrics records (everything the loop does
for a batch: sampling, teacher scoring, grading, update, bookkeeping); the sum of the three phase times
(time_rollout_s + time_teacher_s + time_update_s) is printed beside it. TRL: wall time of two optimiser
steps, between on_step_end callbacks (data loading, generation, loss, backward, clipping, optimiser,
scheduler, logging); its generation time (DistillationTrainer._generate) is printed beside it. Medians
over all timed batches of all rounds; the ratio is of the wall-time medians.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import torch

from gropd.cli import quiet_libraries
from gropd.config import load_manifests
from gropd.record.run_dir import RunDir
from gropd.runs.pipeline import load_run, open_run_dir
from gropd.train.loop import train_run

RUN = "table1__I4nothink-I1.7nothink__opd"
PHASES = ("time_rollout_s", "time_teacher_s", "time_update_s")


class TimedRunDir(RunDir):
    """A RunDir that notes when each metrics record (one per rollout batch) is written."""

    def __init__(self, root: Path):
        super().__init__(root)
        self.stamps: list[float] = []

    def append_metrics(self, record: dict) -> None:
        super().append_metrics(record)
        self.stamps.append(time.perf_counter())


def ours(steps: int, results: Path) -> dict[str, list[float]]:
    """1 + `steps` rollout batches of our trainer; per timed batch: wall seconds, phase sum, mean length."""
    manifests = load_manifests(Path("experiments"))
    config = load_run(manifests, "tiny", RUN, [f"train.steps={steps + 1}"])
    run_dir = TimedRunDir(results / f"ours-{time.monotonic_ns()}")
    open_run_dir(config, manifests, run_dir)
    train_run(config, manifests, run_dir)
    rows = run_dir.read_metrics()[1:]
    return {
        "wall_s": [b - a for a, b in zip(run_dir.stamps, run_dir.stamps[1:], strict=False)],
        "phases_s": [sum(r[p] for p in PHASES) for r in rows],
        "len": [r["mean_response_len"] for r in rows],
    }


def trl_work(steps: int):
    """What TRL needs for 1 + `steps` rollout batches: config, student, teacher, tokenizer, prompt texts."""
    from gropd.model.checkpoints import load_model
    from gropd.model.components import PromptRenderer, load_student, pairing_roles
    from gropd.templates import render_prompt
    from gropd.train.prompts import PromptSampler, load_prompt_pool

    manifests = load_manifests(Path("experiments"))
    config = load_run(manifests, "tiny", RUN, [f"train.steps={steps + 1}"])
    student, teacher, render = pairing_roles(config, manifests)
    if render != "own" or student.mode != "nothink" or teacher.mode != "nothink":
        raise RuntimeError(f"{RUN}: expected a nothink/nothink pairing with the teacher's own render")
    device = torch.device("cpu")
    model, tokenizer = load_student(student, teacher, device, "float32")
    teacher_model = load_model(teacher.ref, device, "float32")
    t = config.train
    sampler = PromptSampler(load_prompt_pool(t.prompts.source, config.profile, manifests), config.seed)
    questions = [q.question for _ in range(steps + 1) for q in sampler.next(t.prompts_per_batch)]
    instruction = config.prompt.instruction
    renderer = PromptRenderer(tokenizer, "nothink", instruction)
    texts = [render_prompt(q, "nothink", tokenizer, instruction) for q in questions]
    if tokenizer(text=texts)["input_ids"] != [renderer(q) for q in questions]:
        raise RuntimeError("TRL would tokenise the rendered prompts differently from PromptRenderer")
    return config, model, teacher_model, tokenizer, [text for text in texts for _ in range(t.group_size)]


def trl(steps: int, results: Path) -> dict[str, list[float]]:
    """1 + `steps` rollout batches (2 optimiser steps each) of TRL's DistillationTrainer; per timed batch:
    wall seconds, generation seconds, mean completion length."""
    from accelerate.state import AcceleratorState, GradientState
    from datasets import Dataset
    from transformers import TrainerCallback
    from transformers.trainer_callback import PrinterCallback, ProgressCallback
    from trl import DistillationConfig, DistillationTrainer

    from gropd.train.loop import make_optimizer

    config, model, teacher_model, tokenizer, prompts = trl_work(steps)
    t, s = config.train, config.sampling
    updates_per_batch = t.prompts_per_batch * t.group_size // t.minibatch_responses
    args = DistillationConfig(
        output_dir=str(results / f"trl-{time.monotonic_ns()}"),
        per_device_train_batch_size=t.minibatch_responses,
        gradient_accumulation_steps=1,
        max_steps=(steps + 1) * updates_per_batch,
        learning_rate=t.optimizer.lr,
        max_grad_norm=t.max_grad_norm,
        beta=1.0,  # reverse KL
        temperature=s.temperature,
        top_p=s.top_p,
        top_k=0,
        max_completion_length=s.max_new_tokens,
        shuffle_dataset=False,
        use_vllm=False,
        use_cpu=True,
        bf16=False,
        fp16=False,
        gradient_checkpointing=False,
        report_to="none",
        save_strategy="no",
        logging_steps=updates_per_batch,
        disable_tqdm=True,
        dataloader_num_workers=0,
        seed=config.seed,
    )
    AcceleratorState._reset_state()  # our run's Accelerator state; TRL's Trainer makes its own
    GradientState._reset_state()
    optimizers = make_optimizer(config, model)  # the same AdamW and schedule as ours, same total updates
    trainer = DistillationTrainer(
        model=model,
        teacher_model=teacher_model,
        args=args,
        train_dataset=Dataset.from_dict({"prompt": prompts}),
        processing_class=tokenizer,
        optimizers=optimizers,
    )
    trainer.remove_callback(PrinterCallback)
    trainer.remove_callback(ProgressCallback)
    stamps: list[float] = []
    generation: list[float] = []
    lengths: list[float] = []

    class Stamps(TrainerCallback):
        def on_train_begin(self, *_, **__):
            stamps.append(time.perf_counter())

        def on_step_end(self, *_, **__):
            stamps.append(time.perf_counter())

    generate = trainer._generate

    def timed_generate(batch_prompts):
        started = time.perf_counter()
        out = generate(batch_prompts)
        generation.append(time.perf_counter() - started)
        lengths.append(statistics.mean(len(ids) for ids in out[1]))
        return out

    trainer._generate = timed_generate
    trainer.add_callback(Stamps())
    torch.set_num_threads(1)
    trainer.train()
    u = updates_per_batch
    batches = range(1, steps + 1)  # batch 0 (its u updates) is the warm-up
    return {
        "wall_s": [stamps[(b + 1) * u] - stamps[b * u] for b in batches],
        "generate_s": [sum(generation[b * u : (b + 1) * u]) for b in batches],
        "len": [statistics.mean(lengths[b * u : (b + 1) * u]) for b in batches],
    }


def summary(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3, help="rounds of (TRL, ours)")
    parser.add_argument("--steps", type=int, default=6, help="timed rollout batches per side per round")
    args = parser.parse_args()
    quiet_libraries()
    torch.set_num_threads(1)
    figures: dict[str, dict[str, list[float]]] = {"trl": {}, "ours": {}}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.rounds):
            for side, measure in (("trl", trl), ("ours", ours)):
                got = measure(args.steps, Path(tmp))
                for key, values in got.items():
                    figures[side].setdefault(key, []).extend(values)
                print(
                    f"round {round_ + 1}/{args.rounds} {side:<4} wall s/128: "
                    + " ".join(f"{v:.3f}" for v in got["wall_s"]),
                    flush=True,
                )
    table = {side: {key: summary(values) for key, values in f.items()} for side, f in figures.items()}
    ratio = table["ours"]["wall_s"]["median"] / table["trl"]["wall_s"]["median"]
    print(f"\n{'s per 128 responses':<22} {'median':>7} {'min':>7} {'max':>7} {'len':>6}")
    for label, side, key in (
        ("TRL wall", "trl", "wall_s"),
        ("  TRL generate", "trl", "generate_s"),
        ("ours wall", "ours", "wall_s"),
        ("  ours 3 phases", "ours", "phases_s"),
    ):
        f = table[side][key]
        print(f"{label:<22} {f['median']:7.3f} {f['min']:7.3f} {f['max']:7.3f} {table[side]['len']['median']:6.1f}")
    print(f"ratio ours/TRL (wall medians): {ratio:.3f}   (goal <= 0.6)")
    print(
        json.dumps(
            {
                "benchmark": "trl_step",
                "run": RUN,
                "rounds": args.rounds,
                "steps": args.steps,
                "threads": torch.get_num_threads(),
                "ratio_ours_trl": ratio,
                "total_s": time.perf_counter() - started,
                "summary": table,
                "per_batch": figures,
            }
        )
    )


if __name__ == "__main__":
    main()

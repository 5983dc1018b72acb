"""What a scoring pass says about the long horizon: response length, J_H(H), and wrong-way feedback after errors.

    python benchmarks/long_horizon_mechanism.py results/tiny-long/fig1__I4nothink-I1.7nothink__score

Reads a finished scoring pass (run kind `score`: the untrained student's rollout batches, `batches/*.pt`, scored by
the teacher, and horizon.json, J_H at every horizon: gropd.horizon) and rebuilds each batch's questions the way the
pass drew them (its prompt pool and sampler: gropd.train.prompts, gropd.train.step.assign_prompts, one process).
It prints one JSON object:

    mean_response_len    mean student response length in tokens; reward, the share graded correct
    J_H                  J_H(H) at H = 8, 32, 64, 128, 256 and the longest response
    first_error          per response, the first token where it leaves its question's worked solution (the one the
                         world's models were trained on: tiny_tasks.worked_solution rendered in the student's mode),
                         None for a response that is that solution; "early" = within the first third of the
                         solution's tokens
    wrong_way            among incorrect responses with an early error: the share whose feedback after the error
                         sums above zero, Σ_{t > d} f_t > 0 (the teacher, scoring the rest of a response already
                         wrong, would on balance raise it: token-level OPD's A_t = f_t pushes those tokens up, and a
                         sequence score that starts after the error credits it), and the share of their post-error
                         tokens with f_t > 0; with f at the erring token itself (f_d) for contrast
    ends                 where the feedback's mass lies: the share of Σ|f_t| (all responses) on each response's
                         first token and on its last (the stop token), and the mean f there; a teacher that expects
                         another format (a thinking teacher scoring a base student) puts its disagreement there

Ours (the paper names the mechanism, "omits the effects of earlier actions on subsequent feedback", without a
measure of it); experiments/TINY.md, World 5, has the numbers.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import torch
import yaml
from transformers import AutoTokenizer

from eval import tiny_tasks
from gropd.config import load_manifests
from gropd.config.schema import RunConfig
from gropd.model.checkpoints import checkpoint_ref
from gropd.templates import render_target
from gropd.train.prompts import PromptSampler, load_prompt_pool
from gropd.train.step import assign_prompts, step_seed

HORIZONS = (8, 32, 64, 128, 256)


def batch_questions(config: RunConfig, manifests_root: Path) -> list[list]:
    """Each rollout batch's questions in row order (a group of G rows per question), as the pass drew them."""
    manifests = load_manifests(manifests_root)
    sampler = PromptSampler(load_prompt_pool(config.train.prompts.source, config.profile, manifests), config.seed)
    batches = []
    for step in range(1, config.train.steps + 1):
        drawn = sampler.next(config.train.prompts_per_batch)
        batches.append([drawn[i] for i in assign_prompts(len(drawn), step_seed(config.seed, step, 0), 0, 1)])
    return batches


def first_difference(response: list[int], reference: list[int]) -> int | None:
    """The first index where `response` leaves `reference` (None: they are equal)."""
    for index, (got, want) in enumerate(zip(response, reference, strict=False)):
        if got != want:
            return index
    return None if len(response) == len(reference) else min(len(response), len(reference))


def measure(run: Path, experiments: Path = Path("experiments")) -> dict:
    config = RunConfig.model_validate(yaml.safe_load((run / "config.yaml").read_text()))
    manifests = load_manifests(experiments)
    pairing = manifests.pairings[config.pairing]
    student = pairing["student"]
    tokenizer = AutoTokenizer.from_pretrained(
        checkpoint_ref(manifests, config.profile, student["model"]).tokenizer_path
    )
    horizon = json.loads((run / "horizon.json").read_text())
    lengths, post_sums, post_tokens, at_error, early, wrong = [], [], [], [], 0, 0
    firsts, lasts, mass = [], [], 0.0
    for step, questions in enumerate(batch_questions(config, experiments), 1):
        batch = torch.load(run / "batches" / f"step_{step}_rank0.pt", weights_only=True)
        G = batch["group_size"]
        for row, ids in enumerate(batch["response_ids"]):
            question = questions[row // G]
            task = question.id.split("-")[0]
            work = tiny_tasks.worked_solution(task, question.question, "brief")
            target = render_target(work, question.answer, student["mode"])
            reference = tokenizer(target, add_special_tokens=False)["input_ids"]
            length = int(batch["mask"][row].sum())
            lengths.append(length)
            f = batch["f"][row, :length].double()
            firsts.append(float(f[0]))
            lasts.append(float(f[-1]))
            mass += float(f.abs().sum())
            if bool(batch["correct"][row]):
                continue
            wrong += 1
            d = first_difference(list(ids)[:length], reference)
            if d is None or d > len(reference) / 3 or d >= length:
                continue
            early += 1
            at_error.append(float(f[d]))
            post_sums.append(float(f[d + 1 :].sum()))
            post_tokens += f[d + 1 :].tolist()
    values = horizon["values"] or []
    at = lambda h: round(values[min(h, len(values)) - 1], 4) if values else None  # noqa: E731
    return {
        "run": str(run),
        "responses": len(lengths),
        "reward": round(horizon["reward"], 4),
        "mean_response_len": round(statistics.mean(lengths), 1),
        "J_H": {str(h): at(h) for h in (*HORIZONS, len(values))} | {"informative_prompts": horizon["informative"]},
        "incorrect": wrong,
        "early_error": early,
        "wrong_way": {
            "share_post_error_sum_positive": round(sum(s > 0 for s in post_sums) / len(post_sums), 4)
            if post_sums
            else None,
            "share_post_error_tokens_positive": round(sum(v > 0 for v in post_tokens) / len(post_tokens), 4)
            if post_tokens
            else None,
            "mean_post_error_sum": round(statistics.mean(post_sums), 3) if post_sums else None,
            "mean_f_at_error": round(statistics.mean(at_error), 3) if at_error else None,
        },
        "ends": {
            "share_abs_f_first_token": round(sum(map(abs, firsts)) / mass, 4),
            "share_abs_f_last_token": round(sum(map(abs, lasts)) / mass, 4),
            "mean_f_first_token": round(statistics.mean(firsts), 3),
            "mean_f_last_token": round(statistics.mean(lasts), 3),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a finished scoring pass's results directory")
    args = parser.parse_args()
    print(json.dumps(measure(args.run)))


if __name__ == "__main__":
    main()

"""Identical responses scored in different padding layouts (the teacher's and the student's forwards,
as a rollout batch lays them out) differ only by float noise: the group is degenerate under the
relative floor, however large its |S|; a group of genuinely different responses is not."""

from __future__ import annotations

from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from eval.tiny_tasks import train_questions
from gropd.credit import CreditSettings, calibrated_credit, group_stats, token_feedback, trajectory_scores
from gropd.model.forward_batches import no_grad_logprobs
from gropd.templates import render_prompt
from gropd.tiny.world import ensure_tiny_world

REPO = Path(__file__).resolve().parents[1]
CPU = torch.device("cpu")


def test_identical_responses_in_other_layouts_are_one_degenerate_group() -> None:
    world = ensure_tiny_world(REPO / "experiments" / "tiny_world.yaml", REPO / "results" / "tiny" / "world")
    tokenizer = AutoTokenizer.from_pretrained(world.tokenizer_dir)
    student = AutoModelForCausalLM.from_pretrained(world.model_dir("B1.7")).eval()
    teacher = AutoModelForCausalLM.from_pretrained(world.model_dir("I4")).eval()
    question = train_questions("muladd", 1, 3)[0]["question"]
    student_prompt, teacher_prompt = (
        tokenizer.encode(render_prompt(question, mode, tokenizer, "Answer in \\boxed{}."), add_special_tokens=False)
        for mode in ("default", "think")
    )
    response = tokenizer.encode(" 12*7=84\n84+9=93\n\\boxed{93}<|endoftext|>", add_special_tokens=False)
    others = [
        tokenizer.encode(f" {k}*7={7 * k}\n\\boxed{{{7 * k}}}<|endoftext|>", add_special_tokens=False)
        for k in range(1, 9)
    ]
    # 8 layouts: the response beside a companion of another length, first or second, in small forwards
    responses, where = [], []
    for k, other in enumerate(others):
        pair = [response, other] if k % 2 == 0 else [other, response]
        where.append(len(responses) + (0 if k % 2 == 0 else 1))
        responses += pair
    scores = []
    for rows in (where, [len(responses) - 1 - i for i in range(8)]):  # the response 8 times; 8 other responses
        student_logp, _ = no_grad_logprobs(student, [student_prompt] * len(responses), responses, 0, CPU, 80)
        teacher_logp, _ = no_grad_logprobs(teacher, [teacher_prompt] * len(responses), responses, 0, CPU, 120)
        lengths = [len(responses[r]) for r in rows]
        mask = torch.tensor([[1.0] * n + [0.0] * (student_logp.shape[1] - n) for n in lengths])
        f = token_feedback(teacher_logp[rows], student_logp[rows], mask)
        scores.append(trajectory_scores(f, mask, 0.99))
    same, varied = scores
    mu, sigma = group_stats(same, 8)
    assert abs(float(mu)) > 1.0  # a scale where an absolute floor is not the right test
    assert calibrated_credit(torch.cat([same, varied]), CreditSettings(group_size=8))[1].tolist() == [True, False]
    assert float(sigma) <= 1e-5 * abs(float(mu))

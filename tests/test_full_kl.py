"""Method fullkl: the exact per-token reverse KL over the whole vocabulary (gropd/model/chunked_kl.py,
gropd/loss.py full_kl_loss), against a second implementation: the KL written out by enumerating a 3-token
vocabulary with autograd, and on the tiny world the KL of the models' full logits."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from tiny_runs import project, tiny_config

from gropd.config import ConfigError, load_manifests
from gropd.model.chunked_kl import token_reverse_kl
from gropd.record.run_dir import RunDir
from gropd.runs.pipeline import load_run, open_run_dir
from gropd.train.loop import build_context, local_questions, make_accelerator
from gropd.train.step import _micro_batch_loss, collect_rollout


def enumerated_kl(hidden, head, teacher_hidden, teacher_head, temperature):
    """KL_n = Σ_{v in 0..V-1} p_v (log p_v − log q_v), each p_v and q_v written out from the logits."""
    z = (hidden @ head.weight.T + head.bias) / temperature
    u = teacher_hidden @ teacher_head.weight.T + teacher_head.bias
    vocab = range(head.weight.shape[0])
    log_zp = torch.log(sum(torch.exp(z[:, v]) for v in vocab))
    log_zq = torch.log(sum(torch.exp(u[:, v]) for v in vocab))
    return sum(torch.exp(z[:, v] - log_zp) * ((z[:, v] - log_zp) - (u[:, v] - log_zq)) for v in vocab)


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_the_chunked_kl_and_its_gradient_equal_the_enumerated_kl(temperature: float) -> None:
    torch.manual_seed(0)
    head, teacher_head = torch.nn.Linear(5, 3), torch.nn.Linear(6, 3)
    hidden, teacher_hidden = torch.randn(7, 5, requires_grad=True), torch.randn(7, 6)
    upstream = torch.randn(7)  # an arbitrary weighting of the tokens, as a loss's aggregation gives

    got = token_reverse_kl(hidden, head, teacher_hidden, teacher_head, temperature, chunk=3)  # 3 chunks
    (got * upstream).sum().backward()
    got_grads = [hidden.grad.clone(), head.weight.grad.clone(), head.bias.grad.clone()]
    assert teacher_head.weight.grad is None  # the teacher is the anchor: no gradient reaches it
    for tensor in (hidden, head.weight, head.bias):
        tensor.grad = None
    want = enumerated_kl(hidden, head, teacher_hidden, teacher_head, temperature)
    (want * upstream).sum().backward()

    torch.testing.assert_close(got, want.detach(), rtol=0, atol=1e-6)
    for got_grad, want_grad in zip(got_grads, [hidden.grad, head.weight.grad, head.bias.grad], strict=True):
        torch.testing.assert_close(got_grad, want_grad, rtol=0, atol=1e-6)


def test_the_kl_is_zero_against_itself_and_positive_otherwise() -> None:
    torch.manual_seed(1)
    head = torch.nn.Linear(4, 3)
    hidden = torch.randn(5, 4)
    same = token_reverse_kl(hidden, head, hidden, head)
    assert same.abs().max().item() < 1e-6
    other = token_reverse_kl(hidden, head, torch.randn(5, 4), head)
    assert (other > 0).all()


@pytest.mark.slow
@pytest.mark.parametrize("share", [True, False])
def test_a_fullkl_micro_batch_loss_is_the_token_mean_kl_of_the_full_logits(tmp_path: Path, monkeypatch, share) -> None:
    """On the tiny world (I4think→B1.7: the teacher renders the prompt its own way), the fullkl loss of a
    micro-batch and its gradient equal the token-mean KL of the two models' full logits, computed row by row,
    whether a group's prompt is forwarded once (shared) or with each response (packed)."""
    run_id = "table1__I4think-B1.7__opd"
    root = project(tmp_path)
    monkeypatch.chdir(root)
    config = tiny_config(root, run_id, ["method=fullkl", "train.steps=1", f"backend.share_prompt_forward={share}"])
    manifests = load_manifests(root / "experiments")
    run_dir = RunDir(root / "results" / "tiny" / run_id)
    open_run_dir(config, manifests, run_dir)
    accelerator = make_accelerator(config, run_dir.root)
    ctx, sampler = build_context(config, manifests, accelerator)
    rollout = collect_rollout(ctx, config, local_questions(sampler, config, 1, accelerator), seed=3)
    assert rollout.advantages is None and rollout.teacher_hidden is not None
    rows = [0, 1, 9, 17]
    loss, stats = _micro_batch_loss(ctx, config, rollout, rows)
    loss.backward()
    got = {name: p.grad.clone() for name, p in ctx.model.named_parameters()}
    ctx.model.zero_grad(set_to_none=True)

    teacher_prompts = [ctx.teacher_prompt(q.question) for q in rollout.questions for _ in range(8)]
    total, tokens = 0.0, 0
    for row in rows:
        prompt, teacher_prompt = rollout.batch.prompt_ids[row], teacher_prompts[row]
        response = rollout.batch.response_ids[row]
        student = torch.log_softmax(ctx.model(torch.tensor([prompt + response])).logits[0].float(), -1)
        with torch.no_grad():
            teacher = torch.log_softmax(ctx.teacher.model(torch.tensor([teacher_prompt + response])).logits[0], -1)
        p_log = student[len(prompt) - 1 : len(prompt) - 1 + len(response)]  # the positions predicting y_t
        q_log = teacher[len(teacher_prompt) - 1 : len(teacher_prompt) - 1 + len(response)]
        total = total + (p_log.exp() * (p_log - q_log)).sum()
        tokens += len(response)
    want = total / tokens
    want.backward()
    assert loss.item() == pytest.approx(want.item(), rel=1e-5)
    assert stats["kl_mean"].item() == pytest.approx(want.item(), rel=1e-5)
    for name, parameter in ctx.model.named_parameters():
        scale = max(1.0, parameter.grad.abs().max().item())
        torch.testing.assert_close(got[name], parameter.grad, rtol=0, atol=1e-5 * scale)
    assert math.isfinite(loss.item()) and loss.item() > 0


def test_the_paper_profile_refuses_fullkl_before_anything_loads(experiments: Path) -> None:
    """The paper profile's teachers are vLLM engines or servers, which return top-k log-probs at most: fullkl is
    refused when the config is resolved, naming the key and why."""
    manifests = load_manifests(experiments)
    with pytest.raises(ConfigError) as err:
        load_run(manifests, "paper", "table1__I4nothink-I1.7nothink__opd", ["method=fullkl"])
    assert err.value.key == "backend.teacher" and "top-k" in str(err.value) and "'vllm'" in str(err.value)
    assert load_run(manifests, "tiny", "table1__I4nothink-I1.7nothink__opd", ["method=fullkl"]).method == "fullkl"

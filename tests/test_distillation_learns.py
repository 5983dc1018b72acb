"""A short vanilla-OPD run in the tiny profile's regime brings the student closer to its teacher on
held-out questions, measured by the exact reverse KL (not by anything the trainer logs).

The run trains in its own process in the portable numerics mode (gropd/numerics.py): its bits, hence the
outcome asserted, are the same on the Intel Xeons checked (not yet across vendors: README, What is reproducible).
In the native mode they are not (GR-OPD's KL fell to 0.0088 on an AMD EPYC and rose to 0.0161 on an Intel Xeon from
the same 0.0152)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from tiny_runs import FAST, project
from transformers import AutoModelForCausalLM, AutoTokenizer

from eval.suites import Question
from eval.tiny_tasks import eval_questions
from gropd.config import load_manifests
from gropd.model.checkpoints import checkpoint_ref
from gropd.model.components import PromptRenderer, stop_rule
from gropd.model.logprobs import pack
from gropd.model.rollout.base import SamplingSettings
from gropd.model.rollout.hf import HFRollout

pytestmark = pytest.mark.slow
PAIRING = "I4nothink-I1.7nothink"
STEPS = {"opd": 40, "gropd": 100}  # rollout batches a method needs here (see the docstring)
FALLS_TO = {"opd": 0.75, "gropd": 0.9}  # the held-out KL after, as a fraction of before, at most (the docstring)
CPU = torch.device("cpu")


def position_logprobs(model: torch.nn.Module, prompts: list[list[int]], responses: list[list[int]], pad: int):
    """log π(· | h_t) over the whole vocabulary at every response position `[B, T, V]`, and the mask `[B, T]`."""
    batch = pack(prompts, responses, pad, CPU)
    with torch.no_grad():
        logits = model(
            input_ids=batch.input_ids, attention_mask=batch.attention_mask, position_ids=batch.position_ids
        ).logits
    width, length = batch.prompt_width, batch.response_ids.shape[1]
    return torch.log_softmax(logits[:, width - 1 : width - 1 + length].float(), dim=-1), batch.response_mask


def heldout_reverse_kl(student, teacher, tokenizer, questions: list[Question], seed: int) -> float:
    """Mean over the student's own sampled response tokens (4 samples a question, T = 1) of the exact
    per-position KL(π_S ‖ π_T) = Σ_v π_S(v|h) (log π_S(v|h) − log π_T(v|h)); both see the nothink prompt."""
    render = PromptRenderer(tokenizer, "nothink", "Answer in \\boxed{}.")
    prompts = [render(q.question) for q in questions]
    decode = lambda ids: tokenizer.decode(ids, skip_special_tokens=False)  # noqa: E731
    engine = HFRollout(student, stop_rule("nothink", tokenizer), decode, tokenizer.pad_token_id, CPU)
    batch = engine.generate(prompts, 4, SamplingSettings(1.0, 1.0, 200), seed)
    log_s, mask = position_logprobs(student, batch.prompt_ids, batch.response_ids, tokenizer.pad_token_id)
    log_t, _ = position_logprobs(teacher, batch.prompt_ids, batch.response_ids, tokenizer.pad_token_id)
    kl = (log_s.exp() * (log_s - log_t)).sum(-1)
    return float((kl * mask).sum() / mask.sum())


@pytest.mark.parametrize("method", ["opd", "gropd"])
def test_short_run_lowers_the_heldout_reverse_kl(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, method: str) -> None:
    """Rollout batches of the tiny profile's regime (16 prompts x G = 8, two optimiser steps each, lr 2e-4
    with warm-up and decay over the run), GR-OPD at the pairing's Table 1 λ = 0.25, trained in the portable mode.
    KL per token from 0.0152: OPD after 40 batches → 0.0101 portable (0.0101 natively on an AMD EPYC); GR-OPD after
    100 → 0.0121 portable (0.0088 natively on an AMD EPYC, 0.0161 on an Intel Xeon: one seed's GR-OPD outcome
    depends on the float kernels, hence the portable mode, whose bits agree across the Intel Xeons checked). On the
    AMD EPYC GR-OPD after 40 batches did not move it (→ 0.0155), and after 20 both rose (OPD 0.0168, GR-OPD 0.0209),
    the run being all warm-up and decay. Asserted, below the portable outcomes: OPD lowers the KL by a quarter or more,
    GR-OPD by a tenth or more."""
    root = project(tmp_path)
    monkeypatch.chdir(root)
    manifests = load_manifests(root / "experiments")
    run_id = f"table1__{PAIRING}__{method}"
    settings = [*FAST, f"train.steps={STEPS[method]}", "backend.numerics=portable", "backend.threads=1"]
    command = [sys.executable, "-m", "gropd.cli", "run", run_id, "--profile", "tiny", *settings]
    done = subprocess.run(command, cwd=root, capture_output=True, text=True)
    assert done.returncode == 0 and done.stdout.strip().endswith("finished"), done.stderr[-2000:]
    tokenizer = AutoTokenizer.from_pretrained(checkpoint_ref(manifests, "tiny", "I1.7").tokenizer_path)
    questions = [Question(**r) for task in ("add", "sub", "mixed") for r in eval_questions(task, 16)]
    before, after, teacher = (
        AutoModelForCausalLM.from_pretrained(path).eval()
        for path in (
            checkpoint_ref(manifests, "tiny", "I1.7").path,
            root / "results" / "tiny" / run_id / "final",
            checkpoint_ref(manifests, "tiny", "I4").path,
        )
    )
    kl_before = heldout_reverse_kl(before, teacher, tokenizer, questions, seed=7)
    kl_after = heldout_reverse_kl(after, teacher, tokenizer, questions, seed=7)
    print(f"{method}, {STEPS[method]} batches: held-out reverse KL per token {kl_before:.4f} -> {kl_after:.4f}")
    assert kl_after < FALLS_TO[method] * kl_before, f"held-out reverse KL per token: {kl_before:.4f} -> {kl_after:.4f}"

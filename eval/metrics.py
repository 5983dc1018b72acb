"""Suite-level evaluation metrics over per-question sample lists.

Inputs are ragged lists indexed [question][sample] (`[Q][K]`). All scores are percents.

    Avg@K      = 100 * mean_q ( c_q / K_q )                     c_q = correct samples of q
    Macro      = mean over suites of their Avg@K (unweighted, unrounded)
    pass@k     = 1 - C(n - c, k) / C(n, k)                      (Chen et al. 2021, unbiased)
    Maj@K      = 100 * mean_q [ the majority answer of q is correct ]
"""

from __future__ import annotations

import math
import re
import statistics
from collections import Counter


def avg_at_k(correct: list[list[bool]]) -> float:
    """Avg@K in percent: mean over questions of the fraction of its samples correct. [Q][K]"""
    if not correct or any(not samples for samples in correct):
        raise ValueError("avg_at_k needs at least one question and one sample per question")
    return 100.0 * sum(sum(s) / len(s) for s in correct) / len(correct)


def macro(scores: dict[str, float]) -> float:
    """Unweighted mean of the suite scores (unrounded; round only for display)."""
    if not scores:
        raise ValueError("macro needs at least one suite score")
    return statistics.fmean(scores.values())  # an exactly rounded sum: the order of the suites does not matter


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples with c correct: 1 - C(n-c, k)/C(n, k), in [0, 1].

    Computed as 1 - prod_{i=n-c+1..n} (1 - k/i), which avoids huge binomials.
    """
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass_at_k needs 0 <= c <= n and 1 <= k <= n, got n={n} c={c} k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - c + 1, n + 1))


def mean_pass_at_k(correct: list[list[bool]], k: int) -> float:
    """Suite pass@k in percent: mean over questions of pass_at_k(K_q, c_q, k). [Q][K]"""
    if not correct:
        raise ValueError("mean_pass_at_k needs at least one question")
    return 100.0 * sum(pass_at_k(len(s), sum(s), k) for s in correct) / len(correct)


def answer_key(answer: str) -> str:
    """Vote key of an extracted answer: spaces, `$`, `\\left`/`\\right`, `\\!` removed,
    `\\dfrac`/`\\tfrac` read as `\\frac`. Equivalent but differently written answers
    (`0.5` vs `\\frac{1}{2}`) stay distinct votes."""
    key = re.sub(r"\\left|\\right|\\!|\s|\$", "", answer)
    return re.sub(r"\\[dt]frac", r"\\frac", key)


def majority_correct(answers: list[str | None], correct: list[bool]) -> bool:
    """Whether the majority answer of one question's samples is correct.

    Samples without an answer (None) do not vote; no votes -> incorrect. Ties go to the
    answer reached first (lowest sample index); the winner's correctness is that of its
    first sample.
    """
    keys = [answer_key(a) if a is not None else None for a in answers]
    votes = Counter(k for k in keys if k is not None)
    if not votes:
        return False
    top = max(votes.values())
    first = next(i for i, k in enumerate(keys) if k is not None and votes[k] == top)
    return correct[first]


def maj_at_k(answers: list[list[str | None]], correct: list[list[bool]]) -> float:
    """Maj@K in percent: fraction of questions whose majority answer is correct. [Q][K]"""
    if not answers or len(answers) != len(correct):
        raise ValueError("maj_at_k needs matching, non-empty answers and correct lists")
    return 100.0 * sum(majority_correct(a, c) for a, c in zip(answers, correct, strict=True)) / len(answers)


def mean_tokens(tokens: list[list[int]]) -> float:
    """Mean response length in tokens over every sample of every question. [Q][K]"""
    flat = [t for sample_tokens in tokens for t in sample_tokens]
    if not flat:
        raise ValueError("mean_tokens needs at least one sample")
    return sum(flat) / len(flat)

"""Grading throughput: 10,000 realistic responses through eval.grading.Grader.

The responses follow the paper's evaluation mix (Table 5: 30/30/40/500/272/170
questions with K = 32/32/32/8/8/8, i.e. 10,736 samples, of which the first 10,000 are
graded): each question has a gold answer of a suite-typical form (integers; fractions;
radicals; intervals; tuples; multiples of pi; decimals), and each of its K samples is
a few hundred characters of reasoning ending in the gold written in one of several
equivalent ways, one of the question's three recurring wrong answers, or no box.

    python -m benchmarks.grading [--responses 10000] [--batch-questions 64] [--workers N]

Prints responses per second (goal: >= 1,000/s on 2 cores) and a JSON line; the
1-minute load average is reported with it, since other processes slow the workers.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time

from eval.grading import Grader

PAPER_MIX = [
    ("aime24", 30, 32),
    ("aime25", 30, 32),
    ("amc23", 40, 32),
    ("math500", 500, 8),
    ("minerva", 272, 8),
    ("olympiadbench", 170, 8),
]
KIND_WEIGHTS = {
    "aime24": {"int": 1.0},
    "aime25": {"int": 1.0},
    "amc23": {"int": 1.0},
    "math500": {"int": 0.6, "frac": 0.15, "sqrt": 0.08, "interval": 0.05, "tuple": 0.05, "pi": 0.07},
    "minerva": {"int": 0.3, "decimal": 0.5, "frac": 0.1, "sqrt": 0.1},
    "olympiadbench": {"int": 0.4, "frac": 0.2, "sqrt": 0.2, "tuple": 0.1, "pi": 0.1},
}
FILLER = (
    "We expand the expression and collect like terms. Substituting the constraint "
    "gives a quadratic whose discriminant must be non-negative, so "
)


def gold_and_forms(kind: str, rng: random.Random) -> tuple[str, list[str], list[str]]:
    """(gold as a dataset stores it, equivalent written forms, three wrong answers)."""
    a, b = rng.randint(2, 999), rng.randint(2, 97)
    if kind == "int":
        return str(a), [str(a), str(a), f"{a}.0"], [str(a + 1), str(a - 1), str(2 * a)]
    if kind == "decimal":
        x = a / 1000
        return f"{x}", [f"{x}", f"{x}0"], [f"{x + 0.01:.3f}", f"{2 * x:.3f}", f"{x / 10:.4f}"]
    if kind == "frac":
        return (
            rf"\frac{{{a}}}{{{b}}}",
            [rf"\frac{{{a}}}{{{b}}}", rf"\dfrac{{{a}}}{{{b}}}", f"{a}/{b}"],
            [rf"\frac{{{a + 1}}}{{{b}}}", rf"\frac{{{b}}}{{{a}}}", str(a)],
        )
    if kind == "sqrt":
        return (
            rf"{b}\sqrt{{3}}",
            [rf"{b}\sqrt{{3}}", rf"{b}\sqrt3", rf"\sqrt{{{3 * b * b}}}"],
            [rf"{b}\sqrt{{2}}", rf"{b + 1}\sqrt{{3}}", rf"\sqrt{{{b}}}"],
        )
    if kind == "interval":
        c = b + a
        return (f"[{b}, {c})", [f"[{b},{c})", f"[{b}, {c})"], [f"({b}, {c})", f"[{b}, {c}]", f"[{b}, {c + 1})"])
    if kind == "tuple":
        return (
            rf"({b}, \frac{{\pi}}{{{b}}})",
            [rf"({b},\frac{{\pi}}{{{b}}})", rf"({b}, \pi/{b})"],
            [rf"({b}, \pi)", rf"(\frac{{\pi}}{{{b}}}, {b})", f"({b}, {a})"],
        )
    return rf"{b}\pi", [rf"{b}\pi", rf"{b} \pi"], [rf"{b + 1}\pi", rf"\frac{{{b}}}{{\pi}}", str(b)]


def make_responses(total: int, seed: int = 0) -> tuple[list[str], list[str]]:
    """`total` (response, gold) pairs in paper order, K consecutive samples per question."""
    rng = random.Random(seed)
    responses, golds = [], []
    for suite, questions, k in PAPER_MIX:
        kinds, weights = zip(*KIND_WEIGHTS[suite].items(), strict=True)
        for _ in range(questions):
            gold, forms, wrong = gold_and_forms(rng.choices(kinds, weights)[0], rng)
            p_correct = rng.random()
            for _ in range(k):
                roll = rng.random()
                if roll < 0.05:
                    answer = None
                elif roll < 0.05 + 0.95 * p_correct:
                    answer = rng.choice(forms)
                else:
                    answer = rng.choice(wrong)
                text = FILLER * rng.randint(2, 8)
                responses.append(text + (rf"so the answer is \boxed{{{answer}}}." if answer else "."))
                golds.append(gold)
                if len(responses) == total:
                    return responses, golds
    return responses, golds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--responses", type=int, default=10_000)
    parser.add_argument("--batch-questions", type=int, default=64)
    parser.add_argument("--workers", type=int, default=None)
    args = parser.parse_args()
    responses, golds = make_responses(args.responses)
    start = time.perf_counter()
    correct = timeouts = 0
    step = args.batch_questions * 8
    with Grader(workers=args.workers) as grader:
        for i in range(0, len(responses), step):
            verdicts = grader.grade(responses[i : i + step], golds[i : i + step])
            correct += sum(v.correct for v in verdicts)
            timeouts += sum(v.timed_out for v in verdicts)
        judged, cached, workers = grader.judged, len(grader.cache), grader.workers
    seconds = time.perf_counter() - start
    rate = len(responses) / seconds
    print(
        f"graded {len(responses)} responses in {seconds:.2f} s: {rate:,.0f} responses/s "
        f"({workers} workers, {cached} distinct pairs, {judged} math-verify calls)"
    )
    print(
        json.dumps(
            {
                "benchmark": "grading",
                "responses": len(responses),
                "seconds": seconds,
                "responses_per_s": rate,
                "workers": workers,
                "distinct_pairs": cached,
                "math_verify_calls": judged,
                "correct": correct,
                "timeouts": timeouts,
                "load_avg_1m": os.getloadavg()[0],
            }
        )
    )


if __name__ == "__main__":
    main()

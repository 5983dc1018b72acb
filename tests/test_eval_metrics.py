"""Avg@K, Macro, pass@k, Maj@K and mean tokens against hand-worked values (eval/metrics.py)."""

from __future__ import annotations

import math

import pytest

from eval.metrics import (
    answer_key,
    avg_at_k,
    macro,
    maj_at_k,
    majority_correct,
    mean_pass_at_k,
    mean_tokens,
    pass_at_k,
)

T, F = True, False


def test_avg_at_k_by_hand():
    # q1: 3/4, q2: 0/4, q3: 4/4 -> (0.75 + 0 + 1) / 3 = 0.58333.. -> 58.333..%
    correct = [[T, T, F, T], [F, F, F, F], [T, T, T, T]]
    assert avg_at_k(correct) == pytest.approx(175 / 3)
    # per-question fractions are averaged, not pooled samples: (1/2 + 1/4) / 2 = 37.5%
    assert avg_at_k([[T, F], [T, F, F, F]]) == pytest.approx(37.5)


def test_avg_at_k_rejects_empty():
    with pytest.raises(ValueError):
        avg_at_k([])
    with pytest.raises(ValueError):
        avg_at_k([[T], []])


def test_macro_is_unweighted_and_unrounded():
    # six suites as in Table 5; the 500-question suite counts as much as a 30-question one
    scores = {"aime24": 10.0, "aime25": 5.0, "amc23": 40.0, "math500": 70.0, "minerva": 30.0, "olympiadbench": 35.0}
    assert macro(scores) == pytest.approx(190 / 6)
    assert macro({"a": 1.0, "b": 2.0, "c": 2.0}) == 5 / 3  # not rounded to 1.667


def test_pass_at_k_by_hand():
    # n=4, c=1, k=2: 1 - C(3,2)/C(4,2) = 1 - 3/6 = 0.5
    assert pass_at_k(4, 1, 2) == pytest.approx(0.5)
    # n=5, c=2, k=3: 1 - C(3,3)/C(5,3) = 1 - 1/10 = 0.9
    assert pass_at_k(5, 2, 3) == pytest.approx(0.9)
    # pass@1 = c/n
    assert pass_at_k(8, 3, 1) == pytest.approx(3 / 8)
    assert pass_at_k(4, 0, 2) == 0.0
    assert pass_at_k(4, 3, 2) == 1.0  # n - c < k: every k-subset holds a correct sample
    # large n agrees with the binomial formula
    assert pass_at_k(32, 5, 8) == pytest.approx(1 - math.comb(27, 8) / math.comb(32, 8))


def test_pass_at_k_rejects_bad_arguments():
    for n, c, k in [(4, 5, 1), (4, 1, 0), (4, 1, 5)]:
        with pytest.raises(ValueError):
            pass_at_k(n, c, k)


def test_mean_pass_at_k():
    correct = [[T, F, F, F], [F, F, F, F], [T, T, T, T]]
    # pass@2: q1 = 0.5 (above), q2 = 0, q3 = 1 -> 50%
    assert mean_pass_at_k(correct, 2) == pytest.approx(50.0)
    # pass@1 equals Avg@K
    assert mean_pass_at_k(correct, 1) == pytest.approx(avg_at_k(correct))


def test_answer_key():
    assert answer_key(r"\dfrac{1}{2}") == answer_key(r"$\frac{1}{2}$")
    assert answer_key(r"\left( 1, 2 \right)") == "(1,2)"
    assert answer_key("0.5") != answer_key(r"\frac{1}{2}")


def test_majority_vote_and_tie_breaking():
    # "5" has 2 votes, "6" has 1: majority "5" is wrong
    assert majority_correct(["5", "6", "5"], [F, T, F]) is False
    # tie 1-1: the answer reached first wins ("6" at sample 0)
    assert majority_correct(["6", "5"], [T, F]) is True
    assert majority_correct(["5", "6"], [F, T]) is False
    # None does not vote: "7" wins over three blanks
    assert majority_correct([None, None, "7", None], [F, F, T, F]) is True
    assert majority_correct([None, None], [F, F]) is False
    # written differently, same vote key
    assert majority_correct([r"\dfrac{1}{2}", "3", r"\frac{1}{2}"], [T, F, T]) is True


def test_maj_at_k():
    answers = [["5", "5", "6"], ["1", "2", "2"], [None, None, None], ["9", "9", "9"]]
    correct = [[T, T, F], [T, F, F], [F, F, F], [T, T, T]]
    # majorities: q1 correct, q2 wrong, q3 no vote, q4 correct -> 2/4 = 50%
    assert maj_at_k(answers, correct) == pytest.approx(50.0)


def test_mean_tokens():
    # all samples pooled: (10 + 20 + 30 + 40 + 50 + 60) / 6 = 35
    assert mean_tokens([[10, 20], [30, 40], [50, 60]]) == pytest.approx(35.0)
    with pytest.raises(ValueError):
        mean_tokens([[]])

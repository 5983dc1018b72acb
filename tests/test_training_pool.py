"""Issue 53's fourth bad case, replayed: every training-pool request (train.prompts.source: tasks, per_task) is
checked against the pool's size at the front door and by --dry-run (per_task=64801 of muladd, which has 63,800, drew
questions forever; per_task=4000 passed --dry-run and failed making the pool), and no draw of questions is unbounded."""

from __future__ import annotations

import itertools

import pytest
from scratch_clone import refused, scratch_fixture  # noqa: F401  (scratch: a fixture)
from test_front_door import RUN

from eval import tiny_tasks

PAIRS = list(itertools.product(range(10, 100), repeat=2))
OPERANDS = {  # each task's operand tuples, by the ranges of eval/tiny_tasks.py's docstring
    "add": lambda: itertools.product(range(10, 100), repeat=2),
    "sub": lambda: ((a, b) for a in range(10, 100) for b in range(10, a)),
    "mul": lambda: itertools.product(range(100, 1000), range(2, 10)),
    "add3": lambda: itertools.product(range(10, 100), repeat=3),
    "mixed": lambda: ((a, b, c) for a, b in PAIRS for c in range(10, min(99, a + b - 1) + 1)),
    "muladd": lambda: itertools.product(range(10, 100), range(2, 10), range(10, 100)),
}  # fmt: skip


@pytest.mark.parametrize("task", tiny_tasks.TASKS)
def test_each_pool_size_is_its_distinct_questions_but_the_held_out_ones(task: str) -> None:
    """Every question of the task enumerated: its distinct texts but the 1,000 evaluation ones (all among them)."""
    texts = {tiny_tasks.format_question(task, operands) for operands in OPERANDS[task]()}
    held_out = {record["question"] for record in tiny_tasks.eval_questions(task, tiny_tasks.EVAL_POOL)}
    assert held_out <= texts and tiny_tasks.train_pool_size(task) == len(texts) - len(held_out)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["train.prompts.source.tasks=[muladd]", "train.prompts.source.per_task=64801"], "'muladd' has only 63800"),
        (["train.prompts.source.per_task=4000"], "'sub' has only 3005"),
    ],
)
def test_a_pool_request_beyond_the_pool_is_refused_at_the_front_door(scratch, capsys, overrides, message) -> None:
    """per_task=64801 of muladd (63,800) drew questions forever; per_task=4000 passed --dry-run, then failed making the
    run's pool. Both refused by --dry-run and by run, before anything."""
    for command in (["grid", "table1", "--dry-run"], ["run", RUN]):
        err = refused(scratch, [*command, "--profile", "tiny", *overrides], capsys)
        assert f"train.prompts.source: source.per_task={overrides[-1].split('=')[1]}, but task {message}" in err


def test_a_whole_pool_is_drawn_and_the_draws_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """The largest request of a task is met (every training question of sub, unique, none held out); a draw that
    could never end (operands always alike) stops with an error instead of looping."""
    pool = tiny_tasks.train_questions("sub", 3005, seed=0)
    held_out = {record["question"] for record in tiny_tasks.eval_questions("sub", tiny_tasks.EVAL_POOL)}
    assert len({q["question"] for q in pool}) == 3005 and not held_out & {q["question"] for q in pool}
    with pytest.raises(ValueError, match="only 3005"):
        tiny_tasks.train_questions("sub", 3006, seed=0)
    monkeypatch.setattr(tiny_tasks, "draw_operands", lambda task, rng: (50, 20))
    with pytest.raises(RuntimeError, match="within the draws' bound"):
        tiny_tasks.train_questions("sub", 2, seed=0)

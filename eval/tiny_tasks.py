"""Six generated arithmetic suites of rising difficulty, with worked solutions.

    task     question    operands                                steps
    add      47+85       a, b in [10, 99]                        2 columns with carries
    sub      85-47       a > b in [10, 99]                       2 columns with borrows
    mul      347*6       a in [100, 999], b in [2, 9]            3 partial products with carries
    add3     47+85+69    a, b, c in [10, 99]                     2 columns of three digits
    mixed    47+85-93    a, b in [10, 99], c in [10, a+b-1]      2 addition + 2-3 subtraction columns
    muladd   47*6+85     a in [10, 99], b in [2, 9], c in [10, 99]   2 products + 2-3 addition columns

(Operands are kept small so that the models, trained for minutes on two CPU cores, learn
the digit-wise procedure; the worked solutions are still 30-125 tokens long.)

The long-horizon world (experiments/tiny_world_long.yaml, world 5) has one more task, whose worked solutions are
200-500 tokens of dependent steps:

    chain    47+8-3+6-9+5-7    a start in [10, 99], then 6-9 terms ±d, d in [2, 9]; the sign keeps every
                               running value in [10, 99] (+ when − would fall below 10, − when + would pass
                               99, else drawn)

Its worked solution is one line per term: the expression left, the first operation's columns (as above, brief)
and its result, which starts the next line's expression:

    "47+8-3+6: 7+8+0=15 c1 4+0+1=5 c0 so 55"     "55-3+6: 5-3-0=2 b0 5-0-0=5 b0 so 52"     "52+6: ..."

so every step reads the line before it, and an error in one step changes every later step and the answer
(~30-50 tokens a step). TASKS stays the six tasks above (world 4's); LONG_TASKS holds chain, and every function
here takes a task of either.

Answers are plain positive integers. The held-out set of each task is FIXED: the first
`n` of a list of EVAL_POOL unique questions drawn from EVAL_SEED, so small settings use a
prefix of the full set. Training questions come from their own seed and never equal an
evaluation question of any task.

Worked solutions go column by column from the ones digit, one line per column, and end
in "\\boxed{answer}". Two styles share one step vocabulary:

    brief      "7+5+0=12 c1"                        (column digits + carry-in = sum, carry-out)
    detailed   "7+5+0=12 c1 so 2"                    (... plus the answer digits so far)
               "7*6=42 42+0=42 c4 so 2"              (products and carries as separate steps)

Subtraction columns read "12-5-0=7 b1": top digit (+10 when borrowing), bottom digit,
borrow-in, difference digit, borrow-out. Two-phase tasks write the intermediate result
as a header line ("132-93") before the second phase.
"""

from __future__ import annotations

import functools
import math
import random
import re

VERSION = 2
TASKS = ("add", "sub", "mul", "add3", "mixed", "muladd")
LONG_TASKS = ("chain",)
ALL_TASKS = TASKS + LONG_TASKS  # a task's index here seeds its evaluation pool
CHAIN_TERMS = (6, 9)  # terms of a chain question (inclusive)
CHAIN_RANGE = (10, 99)  # every running value of a chain
STYLES = ("brief", "detailed")
EVAL_POOL = 1000
EVAL_SEED = 20_610_230


def check_task(task: str) -> str:
    """Return `task` if it is one of ALL_TASKS, else raise ValueError listing the valid ones."""
    if task not in ALL_TASKS:
        raise ValueError(f"unknown tiny task {task!r}; valid tasks: {', '.join(ALL_TASKS)}")
    return task


def draw_operands(task: str, rng: random.Random) -> tuple[int, ...]:
    """One random operand tuple for `task` (ranges in the module docstring)."""
    check_task(task)
    if task in ("add", "add3"):
        return tuple(rng.randint(10, 99) for _ in range(2 if task == "add" else 3))
    if task == "sub":
        a, b = rng.sample(range(10, 100), 2)
        return (max(a, b), min(a, b))
    if task == "mul":
        return (rng.randint(100, 999), rng.randint(2, 9))
    if task == "mixed":
        a, b = rng.randint(10, 99), rng.randint(10, 99)
        return (a, b, rng.randint(10, min(99, a + b - 1)))
    if task == "chain":
        return _draw_chain(rng)
    return (rng.randint(10, 99), rng.randint(2, 9), rng.randint(10, 99))


def _draw_chain(rng: random.Random) -> tuple[int, ...]:
    """A chain's start, then its signed terms (a negative term subtracts), drawn as the module docstring says."""
    low, high = CHAIN_RANGE
    value = rng.randint(low, high)
    drawn = [value]
    for _ in range(rng.randint(*CHAIN_TERMS)):
        x = rng.randint(2, 9)
        sign = -1 if value + x > high else 1 if value - x < low else rng.choice((1, -1))
        drawn.append(sign * x)
        value += sign * x
    return tuple(drawn)


_OPERATORS = {"add": "+", "sub": "-", "mul": "*", "add3": "++", "mixed": "+-", "muladd": "*+"}


def format_question(task: str, operands: tuple[int, ...]) -> str:
    """The question text, e.g. ("mixed", (47, 85, 93)) → "47+85-93"."""
    if check_task(task) == "chain":
        return str(operands[0]) + "".join(f"{x:+d}" for x in operands[1:])
    ops = _OPERATORS[task]
    return str(operands[0]) + "".join(op + str(x) for op, x in zip(ops, operands[1:], strict=True))


def parse_operands(question: str) -> tuple[int, ...]:
    """The integers of a question, left to right."""
    return tuple(int(x) for x in re.findall(r"\d+", question))


def question_operands(task: str, question: str) -> tuple[int, ...]:
    """The operands of `task`'s question: parse_operands, but a chain's terms keep their signs
    ("347+25-61" → (347, 25, -61))."""
    if check_task(task) == "chain":
        return tuple(int(x) for x in re.findall(r"[+-]?\d+", question))
    return parse_operands(question)


def solve(task: str, operands: tuple[int, ...]) -> int:
    """The exact answer of one question."""
    check_task(task)
    if task == "chain":
        return sum(operands)
    if task == "mul":
        return operands[0] * operands[1]
    if task == "muladd":
        return operands[0] * operands[1] + operands[2]
    if task == "sub":
        return operands[0] - operands[1]
    if task == "mixed":
        return operands[0] + operands[1] - operands[2]
    return sum(operands)


def _record(task: str, operands: tuple[int, ...], qid: str) -> dict:
    return {"id": qid, "question": format_question(task, operands), "answer": str(solve(task, operands))}


@functools.cache
def _eval_pool(task: str) -> tuple[str, ...]:
    """The fixed list of EVAL_POOL unique evaluation questions of `task`."""
    rng = random.Random(EVAL_SEED + ALL_TASKS.index(check_task(task)))
    seen: dict[str, None] = {}
    while len(seen) < EVAL_POOL:
        seen[format_question(task, draw_operands(task, rng))] = None
    return tuple(seen)


def eval_questions(task: str, n: int) -> list[dict]:
    """The first `n` (≤ EVAL_POOL) held-out questions of `task`: dicts with id, question, answer."""
    if not 0 <= n <= EVAL_POOL:
        raise ValueError(f"eval_questions: n must be in [0, {EVAL_POOL}], got {n}")
    return [_record(task, question_operands(task, q), f"{task}-{i:04d}") for i, q in enumerate(_eval_pool(task)[:n])]


@functools.cache
def question_space(task: str) -> int:
    """How many distinct questions `task` has (chain: at least; the operand ranges of the module docstring;
    distinct operands make distinct question texts)."""
    counts = {
        "add": 90 * 90,  # ordered pairs
        "sub": 90 * 89 // 2,  # a > b: pairs of distinct operands
        "mul": 900 * 8,
        "add3": 90**3,
        "mixed": sum(min(99, a + b - 1) - 9 for a in range(10, 100) for b in range(10, 100)),  # c in [10, a+b-1]
        "muladd": 90 * 8 * 90,
        "chain": 90 * 8 ** CHAIN_TERMS[0],  # a lower bound: the start and the first terms' sizes (signs add more)
    }
    return counts[check_task(task)]


def train_pool_size(task: str) -> int:
    """How many training questions `task` has: its questions but its EVAL_POOL evaluation ones (sub has 3,005)."""
    return question_space(task) - EVAL_POOL


def train_questions(task: str, n: int, seed: int) -> list[dict]:
    """`n` unique training questions of `task` from `seed`, none of them an evaluation question.

    Raises ValueError when the task has fewer than `n` such questions (train_pool_size). The draws are bounded: past
    space · (ln space + 30) of them (the coupon collector's tail, beyond e^-30 for a whole pool) it raises.
    """
    rng = random.Random(f"train-{task}-{seed}")
    held_out = set(_eval_pool(task))
    if n > (size := train_pool_size(task)):
        raise ValueError(f"train_questions: task {task!r} has only {size} training questions")
    space = question_space(task)
    seen: dict[str, None] = {}
    for _ in range(math.ceil(space * (math.log(space) + 30))):
        if len(seen) == n:
            break
        question = format_question(task, draw_operands(task, rng))
        if question not in held_out:
            seen[question] = None
    if len(seen) < n:
        raise RuntimeError(f"train_questions: {len(seen)} of {n} questions of {task!r} found within the draws' bound")
    return [_record(task, question_operands(task, q), f"{task}-s{seed}-{i:05d}") for i, q in enumerate(seen)]


def _digit(n: int, place: int) -> int:
    return n // 10**place % 10


def _add_lines(nums: tuple[int, ...], detailed: bool) -> tuple[list[str], int]:
    """Column addition of `nums`: one line "d1+d2(+d3)+carry=s cK" per column, ones first."""
    width = len(str(max(nums)))
    lines, carry, written = [], 0, ""
    for place in range(width):
        digits = [_digit(x, place) for x in nums]
        total = sum(digits) + carry
        last = place == width - 1
        written = str(total if last else total % 10) + written
        line = "+".join(map(str, digits)) + f"+{carry}={total} c{total // 10}"
        lines.append(line + (f" so {written}" if detailed else ""))
        carry = total // 10
    return lines, sum(nums)


def _sub_lines(a: int, b: int, detailed: bool) -> tuple[list[str], int]:
    """Column subtraction a − b (a ≥ b): one line "top-bottom-borrow=d bK" per column."""
    lines, borrow, written = [], 0, ""
    for place in range(len(str(a))):
        top, bottom = _digit(a, place), _digit(b, place)
        out = int(top - bottom - borrow < 0)
        diff = top + 10 * out - bottom - borrow
        written = str(diff) + written
        line = f"{top + 10 * out}-{bottom}-{borrow}={diff} b{out}"
        lines.append(line + (f" so {written}" if detailed else ""))
        borrow = out
    return lines, a - b


def _mul_lines(a: int, b: int, detailed: bool) -> tuple[list[str], int]:
    """a × one digit b: one line per digit of a, "d*b+carry=p cK" (detailed: product, then add)."""
    width = len(str(a))
    lines, carry, written = [], 0, ""
    for place in range(width):
        d = _digit(a, place)
        total = d * b + carry
        written = str(total if place == width - 1 else total % 10) + written
        if detailed:
            lines.append(f"{d}*{b}={d * b} {d * b}+{carry}={total} c{total // 10} so {written}")
        else:
            lines.append(f"{d}*{b}+{carry}={total} c{total // 10}")
        carry = total // 10
    return lines, a * b


def _chain_lines(terms: tuple[int, ...], detailed: bool) -> tuple[list[str], int]:
    """A chain's steps, one line each: the expression left ("acc±d±e..."), ": ", the first operation's brief
    columns and " so result"; the next line's expression is that result and the terms after the first (a chain
    has one style: `detailed` is not read)."""
    lines, value = [], terms[0]
    for k, x in enumerate(terms[1:], 1):
        columns, result = _add_lines((value, x), False) if x > 0 else _sub_lines(value, -x, False)
        rest = "".join(f"{y:+d}" for y in terms[k:])
        lines.append(f"{value}{rest}: {' '.join(columns)} so {result}")
        value = result
    return lines, value


def worked_solution(task: str, question: str, style: str) -> str:
    """The worked solution of `question` in `style` ("brief" or "detailed"), ending in \\boxed{answer}."""
    if style not in STYLES:
        raise ValueError(f"unknown solution style {style!r}; valid styles: {', '.join(STYLES)}")
    detailed = style == "detailed"
    x = question_operands(task, question)
    if task == "chain":
        lines, result = _chain_lines(x, detailed)
    elif task in ("add", "add3"):
        lines, result = _add_lines(x, detailed)
    elif task == "sub":
        lines, result = _sub_lines(x[0], x[1], detailed)
    elif task == "mul":
        lines, result = _mul_lines(x[0], x[1], detailed)
    elif task == "mixed":
        lines, partial = _add_lines(x[:2], detailed)
        second, result = _sub_lines(partial, x[2], detailed)
        lines += [f"{partial}-{x[2]}"] + second
    else:
        lines, partial = _mul_lines(x[0], x[1], detailed)
        second, result = _add_lines((partial, x[2]), detailed)
        lines += [f"{partial}+{x[2]}"] + second
    return "\n".join(lines + [f"\\boxed{{{result}}}"])

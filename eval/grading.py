"""Answer grading: extract a response's final answer and judge it against the gold answer.

Contract
--------
    verdict(response, gold) = Grade(extracted, correct, timed_out)
    extracted = extract_answer(response)              (None: the response gives no answer)
    correct   = extracted is not None and math_verify.verify(parse(gold), parse(extracted))

Extraction (`extract_answer`), in this order, on the *final segment* of the response
(the text after the last `</think>`; a response that opens `<think>` without closing
it, or, with `thinking=True`, has no `</think>` at all, gives no answer):

1. the content of the last `\\boxed{...}` / `\\fbox{...}` (braces matched, `\\{ \\}`
   escapes skipped); if that last box is never closed (a truncated response) there is
   no answer: an earlier box is *not* used, because the model moved on from it;
2. otherwise the last "answer is X" / "Answer: X" / "answer = X" phrase: the first
   `$...$` or `\\(...\\)` after it, else the rest of its sentence;
3. otherwise no answer. There is deliberately no "last number in the text" fallback:
   the last number of an unfinished derivation is usually an intermediate quantity.

Equivalence is math-verify's (`parse` + `verify`, gold first, its default tolerances),
with math-verify's own `signal.alarm` timeouts switched off (they fail outside the main
thread) and replaced by a per-item timeout enforced on worker processes: a worker still
busy after `timeout_s` is killed and replaced, and its item is graded incorrect and
counted as timed out. Workers are fresh interpreters (eval/grading_worker.py) that never
import the caller's `__main__`, so grading works from any script, guarded or not. Two
in-process shortcuts never call math-verify:

* `fast_verdict`: a pair whose two sides are the same text after `normalise_text`
  (spaces, `$`, `\\left`/`\\right` dropped, `\\dfrac` read as `\\frac`) is correct; a
  pair whose two sides are both simple closed forms (`-12`, `27.0`, `3/4`,
  `\\frac{3}{4}`, `2\\sqrt{3}`, `\\frac{\\sqrt3}{2}`, `\\frac{6}{\\pi}`; see `simple_value`) is decided
  when the answer is obvious: equal values are correct; values that differ by more than
  1e-3 relative *and* 1e-5 absolute are incorrect (well outside math-verify's
  tolerance); tuples/intervals of such forms with the same brackets and length are
  correct when every entry is equal and incorrect when one is far apart (reversed
  half-open pairs excepted: math-verify reads `[65, 3)` as the empty set, so
  `[65, 3)` vs `[66, 4)` is correct for it); anything else goes
  to math-verify, so the fast path never disagrees
  with it (tests/test_grading.py checks this on sample pairs);
* verdicts are cached by (gold, extracted), so the K samples of one question that
  repeat an answer are judged once.

Known math-verify false positives and what this module does about them (asserted in
tests/test_grading.py):

* `\\frac{1}{2004!}` vs `\\frac{1}{2006!}` is judged CORRECT: both round to 0 at 6
  decimals. Accepted false positive (numeric answers this small do not occur in the
  six suites' gold answers).
* `\\pm 2021` vs `2021` (either order) is judged incorrect: math-verify compares the
  set {-2021, 2021} with 2021. Not a false positive in the installed version.
* different lines written as equations (`2x+3y=0` vs `x-y=0`, `x^2-1=0` vs `x-1=0`)
  are judged incorrect; the same line scaled (`y=2x+1` vs `2y=4x+2`) is correct.
  Not a false positive in the installed version.
* a bare percentage matches its number (`50` vs `50\\%`), and `3` matches `x=3`:
  math-verify's deliberate leniency, accepted.
"""

from __future__ import annotations

import functools
import math
import os
import re
import socket
import subprocess
import sys
import time
import weakref
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from multiprocessing.connection import Connection, wait
from pathlib import Path

# ----------------------------------------------------------------------------- extraction

_BOX_OPEN = re.compile(r"\\(?:boxed|fbox)\s*\{")
_ANSWER_PHRASE = re.compile(r"(?i)\banswer\s*(?:is\b|:|=)\s*:?")
_INLINE_MATH = re.compile(r"^\s*(?:\*\*)?\s*(?:\$\$?(?P<d>[^$]+)\$|\\\((?P<p>.+?)\\\))")
_SENTENCE_END = re.compile(r"\.(?:\s|$)|\n")


def _braced(text: str, start: int) -> str | None:
    """Text from `start` to the brace closing the `{` just before `start`, or None."""
    depth, i = 1, start
    while i < len(text):
        char = text[i]
        if char == "\\":
            i += 2
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return text[start:i]
        i += 1
    return None


def final_segment(response: str, thinking: bool = False) -> str | None:
    """The part of `response` that may hold the final answer: after the last `</think>`.

    None when the response is still thinking: it has `<think>` but no `</think>`, or
    `thinking=True` (the prompt itself opened the think block) and no `</think>`.
    """
    _, sep, tail = response.rpartition("</think>")
    if sep:
        return tail
    if thinking or "<think>" in response:
        return None
    return response


def last_boxed(text: str) -> str | None:
    """Content of the last `\\boxed{..}`/`\\fbox{..}`; None if absent, unclosed or empty."""
    opens = list(_BOX_OPEN.finditer(text))
    if not opens:
        return None
    content = _braced(text, opens[-1].end())
    if content is None or not content.strip():
        return None
    return content.strip()


def answer_phrase(text: str) -> str | None:
    """The answer stated after the last "answer is / answer: / answer =" phrase, or None."""
    phrases = list(_ANSWER_PHRASE.finditer(text))
    if not phrases:
        return None
    rest = text[phrases[-1].end() :]
    inline = _INLINE_MATH.match(rest)
    if inline:
        answer = inline.group("d") if inline.group("d") is not None else inline.group("p")
    else:
        end = _SENTENCE_END.search(rest)
        answer = rest[: end.start()] if end else rest
    answer = answer.strip().strip("*").strip().rstrip(".").strip()
    return answer or None


def extract_answer(response: str, thinking: bool = False) -> str | None:
    """The response's final answer (see the module docstring for the exact order), or None."""
    segment = final_segment(response, thinking)
    if segment is None:
        return None
    return last_boxed(segment) if _BOX_OPEN.search(segment) else answer_phrase(segment)


# ----------------------------------------------------------------------------- equivalence

_FRAC = re.compile(r"^\\frac\{(?P<num>[^{}]*(?:\{\d+\})?[^{}]*)\}\{(?P<den>[^{}]*(?:\{\d+\})?[^{}]*)\}$")
_SLASH = re.compile(r"^(?P<num>.+)/(?P<den>\d+)$")
_MONOMIAL = re.compile(r"^(?P<coef>\d+(?:\.\d+)?)?(?:\\sqrt(?:\{(?P<root>\d+)\}|(?P<digit>\d)))?(?P<pi>\\pi)?$")
_SPACE = re.compile(r"(?<![A-Za-z])\s+|\s+(?![A-Za-z])")
_LEFT_RIGHT = re.compile(r"\\(?:left|right)(?![A-Za-z])|\\!|\$")


def normalise_text(text: str) -> str:
    """Answer text with `$`, `\\!`, `\\left`/`\\right` and spaces not between letters
    removed and `\\dfrac`/`\\tfrac` read as `\\frac`."""
    text = _SPACE.sub("", _LEFT_RIGHT.sub("", text.strip()))
    return re.sub(r"\\[dt]frac(?![A-Za-z])", r"\\frac", text)


def _monomial(text: str) -> tuple[Fraction, int, bool] | None:
    """(c, r, has_pi) of `c\\sqrt{r}\\pi` with every part optional, or None."""
    parts = _MONOMIAL.match(text)
    if not text or parts is None:
        return None
    root = parts.group("root") or parts.group("digit") or 1
    return Fraction(parts.group("coef") or 1), int(root), parts.group("pi") is not None


def simple_value(text: str) -> Fraction | float | None:
    """Value of a simple closed form: [sign] monomial, or a quotient of monomials
    (`\\frac{m}{m}`, or `m/d` with an integer d), a monomial being `c\\sqrt{r}\\pi` with
    every part optional (`-27.0`, `3/4`, `2\\sqrt{3}`, `\\frac{\\sqrt3}{2}`, `\\frac{20}{\\pi}`).
    Exact Fraction when rational, else float; None for anything else."""
    core = normalise_text(text)
    sign = -1 if core.startswith("-") else 1
    core = core[1:] if core[:1] in "+-" else core
    quotient = _FRAC.match(core) or _SLASH.match(core)
    num, den = (quotient.group("num"), quotient.group("den")) if quotient else (core, "1")
    top, bottom = _monomial(num), _monomial(den)
    if top is None or bottom is None or bottom[0] == 0:
        return None
    if top[1:] == bottom[1:] == (1, False):
        return sign * top[0] / bottom[0]
    value = [float(c) * math.sqrt(r) * (math.pi if pi else 1.0) for c, r, pi in (top, bottom)]
    return sign * value[0] / value[1]


def _same_value(a: Fraction | float, b: Fraction | float) -> bool:
    """Exactly equal rationals, or within 1e-12 relative otherwise."""
    if isinstance(a, Fraction) and isinstance(b, Fraction):
        return a == b
    return abs(a - b) <= 1e-12 * max(abs(a), abs(b))


def _far_apart(a: Fraction | float, b: Fraction | float) -> bool:
    """|a - b| > 1e-3 max(|a|, |b|) and |a - b| > 1e-5: far outside math-verify's tolerance."""
    gap = abs(a - b)
    return gap > 1e-3 * max(abs(a), abs(b)) and gap > 1e-5


def simple_tuple(text: str) -> tuple[str, list[Fraction | float]] | None:
    """(brackets, values) of a tuple/interval of simple values such as `(3, \\frac{\\pi}{2})`."""
    core = normalise_text(text)
    if len(core) < 2 or core[0] not in "([" or core[-1] not in ")]":
        return None
    values = [simple_value(part) for part in core[1:-1].split(",")]
    if len(values) < 2 or any(v is None for v in values):
        return None
    return core[0] + core[-1], values


def fast_verdict(gold: str, extracted: str) -> bool | None:
    """Grade without math-verify when it is obvious, else None (ask math-verify).

    Same text after `normalise_text` -> True. Two `simple_value`s: the same value ->
    True, far apart -> False. Two `simple_tuple`s with the same brackets and length:
    the same value in every place -> True, some place far apart -> False, unless a
    half-open pair is reversed (math-verify reads `[65, 3)` as the empty set). Else None.
    """
    if normalise_text(gold) == normalise_text(extracted) != "":
        return True
    a, b = simple_value(gold), simple_value(extracted)
    if a is not None and b is not None:
        if _same_value(a, b):
            return True
        return False if _far_apart(a, b) else None
    ta, tb = simple_tuple(gold), simple_tuple(extracted)
    if ta and tb and ta[0] == tb[0] and len(ta[1]) == len(tb[1]):
        if all(_same_value(x, y) for x, y in zip(ta[1], tb[1], strict=True)):
            return True
        half_open = ta[0] in ("[)", "(]")
        ordered = not half_open or all(v[0] <= v[1] for v in (ta[1], tb[1]))
        if ordered and any(_far_apart(x, y) for x, y in zip(ta[1], tb[1], strict=True)):
            return False
    return None


def _as_math(text: str) -> str:
    """Wrap an answer in `$...$` unless it already carries math delimiters."""
    text = text.strip()
    if text.startswith(("$", "\\(", "\\[")):
        return text
    return f"${text}$"


@functools.lru_cache(maxsize=8192)
def _parsed(text: str) -> list:
    """math-verify's parse of one answer, its signal-based timeout disabled."""
    from math_verify import parse

    return parse(_as_math(text), parsing_timeout=None)


def judge(gold: str, extracted: str) -> bool:
    """math-verify equivalence, gold first, no internal timeout (callers enforce one)."""
    from math_verify import verify

    return bool(verify(_parsed(gold), _parsed(extracted), timeout_seconds=None))


# ----------------------------------------------------------------------------- worker pool

WARM_UP = (
    ("\\frac{1}{2}", "0.5"),
    ("[2, 5)", "(2,5)"),
    ("(3, \\frac{\\pi}{2})", "(3,\\pi/2)"),
    ("\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}", "\\begin{pmatrix}1\\\\2\\end{pmatrix}"),
    ("y=2x+1", "x^2\\sqrt{3}"),
    ("10\\%", "\\text{(C)}"),
)


def _kill(workers: list[_Worker]) -> None:
    for worker in workers:
        worker.process.kill()
        worker.process.wait()


@dataclass
class _Worker:
    process: subprocess.Popen
    conn: Connection
    ready: bool = False
    job: int | None = None
    deadline: float = 0.0
    last_gold: str | None = None


STOOD_STILL_S = 1.0  # a wait that ends this long past the first deadline: the process stood still, no item's time ran


class VerifierPool:
    """Worker processes running `judge`, each item bounded by `timeout_s` wall seconds.

    Each worker is a fresh interpreter running eval/grading_worker.py over a socket pair (POSIX),
    so it never imports the caller's `__main__`: grading works from an unguarded script or from
    `python -`. A worker still busy at its deadline (or one that dies) is killed and replaced; its
    item comes back as (False, True) = (incorrect, timed out). Order is preserved. Workers left
    running are killed at interpreter exit; an idle one also exits when the parent dies. Time the pool stood
    still (SIGSTOP, Ctrl-Z then fg, a paused VM: its workers stood with it) counts against no item: a wait that ends
    over STOOD_STILL_S past the first deadline gives every pending item back the time the wait took.
    """

    def __init__(self, workers: int, timeout_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        if workers < 1 or timeout_s <= 0:
            raise ValueError(f"need workers >= 1 and timeout_s > 0, got {workers}, {timeout_s}")
        self.timeout_s, self.clock = timeout_s, clock
        self._workers = [self._start() for _ in range(workers)]
        # like multiprocessing's daemon processes: killed at interpreter exit if never closed
        self._kill_at_exit = weakref.finalize(self, _kill, self._workers)

    @staticmethod
    def _start() -> _Worker:
        """`python -P -m eval.grading_worker FD`, with this package's root first on its path."""
        parent, child = socket.socketpair()
        root = str(Path(__file__).resolve().parents[1])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
        with child:
            command = [sys.executable, "-P", "-m", "eval.grading_worker", str(child.fileno())]
            process = subprocess.Popen(command, pass_fds=[child.fileno()], env=env, stdin=subprocess.DEVNULL)
        return _Worker(process, Connection(parent.detach()))

    def judge_many(self, pairs: list[tuple[str, str]]) -> list[tuple[bool, bool]]:
        """(correct, timed_out) for each (gold, extracted) pair, in order.

        Pairs are queued by gold and a worker keeps taking pairs of the gold it last
        judged, so each gold is parsed by as few workers as possible (parses are cached).
        """
        results: list[tuple[bool, bool] | None] = [None] * len(pairs)
        by_gold: dict[str, deque[int]] = {}
        for index, (gold, _) in enumerate(pairs):
            by_gold.setdefault(gold, deque()).append(index)
        while by_gold or any(w.job is not None for w in self._workers):
            self._dispatch(by_gold, pairs)
            self._collect(results)
        return [r for r in results if r is not None]

    def _dispatch(self, by_gold: dict[str, deque[int]], pairs: list[tuple[str, str]]) -> None:
        for worker in self._workers:
            if worker.ready and worker.job is None and by_gold:
                gold = worker.last_gold if worker.last_gold in by_gold else next(iter(by_gold))
                worker.job, worker.last_gold = by_gold[gold].popleft(), gold
                if not by_gold[gold]:
                    del by_gold[gold]
                worker.conn.send(pairs[worker.job])
                worker.deadline = self.clock() + self.timeout_s

    def _collect(self, results: list[tuple[bool, bool] | None]) -> None:
        """Wait for one event (an answer, a ready worker, a death or a deadline); handle all.

        A worker's death shows as end of file on its connection (its end closes when it exits).
        """
        busy = [w.deadline for w in self._workers if w.job is not None]
        asked = self.clock()
        timeout = max(0.0, min(busy) - asked) if busy else None
        fired = set(wait([w.conn for w in self._workers], timeout))
        waited = self.clock() - asked
        for worker in self._workers if timeout is not None and waited > timeout + STOOD_STILL_S else ():
            worker.deadline += waited  # each budget as it was when the wait began
        for slot, worker in enumerate(self._workers):
            message, dead = None, False
            if worker.conn in fired:
                try:
                    message = worker.conn.recv()
                except EOFError:
                    dead = True
            if message == "ready":
                worker.ready = True
            elif message is not None:
                results[worker.job] = (bool(message), False)
                worker.job = None
            elif dead or (worker.job is not None and self.clock() >= worker.deadline):
                self._workers[slot] = self._on_stuck_or_dead(worker, results)

    def _on_stuck_or_dead(self, worker: _Worker, results: list) -> _Worker:
        if not worker.ready:
            code = worker.process.wait()
            raise RuntimeError(f"grading worker (eval/grading_worker.py) exited at start-up (code {code}); see above")
        if worker.job is not None:
            results[worker.job] = (False, True)
        _kill([worker])
        worker.conn.close()
        return self._start()

    def close(self) -> None:
        """Stop every worker (politely, then by force)."""
        for worker in self._workers:
            try:
                worker.conn.send(None)
            except OSError:
                pass
        for worker in self._workers:
            try:
                worker.process.wait(timeout=1.0)
            except subprocess.TimeoutExpired:
                worker.process.kill()
                worker.process.wait()
            worker.conn.close()
        self._workers.clear()
        self._kill_at_exit.detach()


# ----------------------------------------------------------------------------- public API


@dataclass(frozen=True)
class Grade:
    """One graded response: the extracted answer (None: no answer), correct, timed_out."""

    extracted: str | None
    correct: bool
    timed_out: bool


class Grader:
    """Grades responses against golds with a verdict cache and a lazily started pool.

    Use as a context manager (or call close()) so the worker processes are stopped.
    """

    def __init__(self, timeout_s: float = 5.0, workers: int | None = None, thinking: bool = False) -> None:
        self.timeout_s = timeout_s
        self.workers = workers or max(1, min(os.cpu_count() or 1, 8))
        self.thinking = thinking
        self.cache: dict[tuple[str, str], tuple[bool, bool]] = {}
        self.judged = 0  # pairs sent to math-verify (cache misses that the fast path left)
        self._pool: VerifierPool | None = None

    def grade(self, responses: list[str], golds: list[str]) -> list[Grade]:
        """One Grade per (response, gold), in order."""
        if len(responses) != len(golds):
            raise ValueError(f"{len(responses)} responses but {len(golds)} golds")
        extracted = [extract_answer(r, self.thinking) for r in responses]
        self._fill_cache({(g, e) for g, e in zip(golds, extracted, strict=True) if e is not None})
        return [
            Grade(e, *self.cache[(g, e)]) if e is not None else Grade(None, False, False)
            for g, e in zip(golds, extracted, strict=True)
        ]

    def _fill_cache(self, pairs: set[tuple[str, str]]) -> None:
        slow = []
        for pair in sorted(pairs - self.cache.keys()):
            fast = fast_verdict(*pair)
            if fast is None:
                slow.append(pair)
            else:
                self.cache[pair] = (fast, False)
        if slow:
            if self._pool is None:
                self._pool = VerifierPool(self.workers, self.timeout_s)
            self.judged += len(slow)
            self.cache.update(zip(slow, self._pool.judge_many(slow), strict=True))

    def close(self) -> None:
        """Stop the worker processes, if any were started."""
        if self._pool is not None:
            self._pool.close()
            self._pool = None

    def __enter__(self) -> Grader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def grade_batch(responses: list[str], golds: list[str], timeout_s: float = 5.0) -> list[bool]:
    """Correctness of each response against its gold (parallel, cached, order-preserving)."""
    with Grader(timeout_s=timeout_s) as grader:
        return [v.correct for v in grader.grade(responses, golds)]

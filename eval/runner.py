"""Evaluation runner: sample K responses per question, grade them, write records and summary.

For each suite (in the order given) the questions are cut into fixed chunks of
`batch_prompts`; chunk c is sampled with one `engine.generate(prompts, K, sampling,
chunk_seed(seed, suite, c))` call, graded, and its records appended to
`out_dir/<suite>.jsonl` in one write (one JSON object per (question, sample)):

    question_id, sample, response, extracted, correct, tokens, finish_reason, timed_out

Resume: on start the file is read back, a torn last line is dropped, records of
questions that are incomplete (fewer than K distinct samples) or no longer in the
suite are removed (the file is rewritten atomically), and only chunks with missing
questions are sampled again, with the same chunk seed, so a resumed evaluation draws
what an uninterrupted one would have; only the missing questions are graded and written.

`out_dir/summary.json` (layout in results/README.md) is written atomically at the end.

Several processes can share one evaluation, each a shard that samples some of the chunks
(eval/shards.py: who samples what, where the shards write, how rank 0 merges them); the records
are the same whatever the number of shards.
"""

from __future__ import annotations

import json
import sys
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

from eval.grading import Grader
from eval.metrics import avg_at_k, macro, maj_at_k, mean_pass_at_k, mean_tokens
from eval.shards import assign_chunks, mark_done, part_path, remove_shards, suite_files, wait_for_shards
from eval.suites import Question, SuiteSpec
from fileio import append_jsonl, atomic_write_text, read_jsonl

Record = dict[str, Any]


class SampledBatch(Protocol):
    """What the runner reads of one generation call: rows prompt-major (prompt i's sample j at i * n + j)."""

    response_ids: list[list[int]]
    finish_reasons: list[str]


class Sampler(Protocol):
    """A model that samples `n` responses per prompt, deterministically for a seed (gropd's rollout engines
    are ones); `sampling` is the engine's own settings object, passed through untouched."""

    def generate(self, prompt_ids: list[list[int]], n: int, sampling: Any, seed: int) -> SampledBatch: ...


def chunk_seed(seed: int, suite: str, chunk: int) -> int:
    """Sampling seed of chunk `chunk` of `suite`: independent of resume history, < 2**31."""
    return (seed * 1_000_003 + zlib.crc32(f"{suite}:{chunk}".encode())) % 2**31


def read_records(path: Path, note: bool = True) -> list[Record]:
    """Records of a suite file; a torn last line is dropped, other bad lines raise (read_jsonl)."""
    return read_jsonl(path, f"delete {path} (its suite is evaluated again)", note)


def complete_records(records: list[Record], questions: list[Question], k: int) -> dict[str, list[Record]]:
    """Records of the questions that have exactly samples 0..k-1, by question id, sorted by sample."""
    wanted = {q.id for q in questions}
    by_question: dict[str, dict[int, Record]] = {}
    for record in records:
        if record["question_id"] in wanted:
            by_question.setdefault(record["question_id"], {})[record["sample"]] = record
    return {
        qid: [samples[j] for j in range(k)] for qid, samples in by_question.items() if set(samples) == set(range(k))
    }


def resume_suite(path: Path, questions: list[Question], k: int) -> dict[str, list[Record]]:
    """Complete records already on disk; the file is rewritten to hold exactly those."""
    records = read_records(path)
    done = complete_records(records, questions, k)
    if path.exists():
        kept = [r for q in questions for r in done.get(q.id, [])]
        atomic_write_text(path, "".join(json.dumps(r) + "\n" for r in kept))
    return done


def chunks(items: list[Question], size: int) -> Iterator[tuple[int, list[Question]]]:
    """(chunk index, chunk) over consecutive slices of `size` items."""
    for index, start in enumerate(range(0, len(items), size)):
        yield index, items[start : start + size]


def sample_chunk(
    engine: Sampler,
    chunk: list[Question],
    todo: set[str],
    *,
    k: int,
    render_prompt: Callable[[str], list[int]],
    decode: Callable[[list[int]], str],
    sampling: Any,
    seed: int,
    grader: Grader,
) -> list[Record]:
    """Sample K responses for every question of the chunk; grade and return those in `todo`."""
    batch = engine.generate([render_prompt(q.question) for q in chunk], k, sampling, seed)
    if len(batch.response_ids) != len(chunk) * k:
        raise RuntimeError(f"engine returned {len(batch.response_ids)} rows, expected {len(chunk) * k}")
    rows = [(q, j, i * k + j) for i, q in enumerate(chunk) if q.id in todo for j in range(k)]
    responses = [decode(batch.response_ids[r]) for _, _, r in rows]
    verdicts = grader.grade(responses, [q.answer for q, _, _ in rows])
    return [
        {
            "question_id": q.id,
            "sample": j,
            "response": response,
            "extracted": verdict.extracted,
            "correct": verdict.correct,
            "tokens": len(batch.response_ids[r]),
            "finish_reason": batch.finish_reasons[r],
            "timed_out": verdict.timed_out,
        }
        for (q, j, r), response, verdict in zip(rows, responses, verdicts, strict=True)
    ]


def suite_summary(spec: SuiteSpec, questions: list[Question], done: dict[str, list[Record]]) -> dict:
    """The summary.json entry of one fully evaluated suite."""
    per_q = [done[q.id] for q in questions]
    correct = [[r["correct"] for r in recs] for recs in per_q]
    return {
        "avg_at_k": avg_at_k(correct),
        "k": spec.k,
        "questions": len(questions),
        "paper_questions": spec.paper_questions,
        "mean_tokens": mean_tokens([[r["tokens"] for r in recs] for recs in per_q]),
        "pass_at_k": mean_pass_at_k(correct, spec.k),
        "maj_at_k": maj_at_k([[r["extracted"] for r in recs] for recs in per_q], correct),
        "timeouts": sum(r.get("timed_out", False) for recs in per_q for r in recs),
    }


def report_progress(suite: str, done: int, total: int, new: int, elapsed: float) -> None:
    """One progress line on stderr: questions done / total, rate and ETA of this session."""
    rate = new / elapsed if elapsed > 0 and new else 0.0
    eta = f"{(total - done) / rate:.0f}s" if rate else "?"
    print(f"[eval {suite}] {done}/{total} questions, {rate:.2f} q/s, ETA {eta}", file=sys.stderr)


def evaluate_suite(
    engine: Sampler,
    name: str,
    spec: SuiteSpec,
    questions: list[Question],
    *,
    out_dir: Path,
    batch_prompts: int,
    seed: int,
    progress: bool,
    shard: tuple[int, int] = (0, 1),
    owned: set[int] | None = None,
    on_chunk: Callable[[], None] = lambda: None,
    **sample_args: Any,
) -> None:
    """Sample (or finish sampling) this shard's chunks of one suite (`owned`: chunk indices, None for all),
    appending their records to the shard's file (eval/shards.py); `on_chunk()` after each chunk written."""
    if len({q.id for q in questions}) != len(questions):
        raise ValueError(f"suite '{name}': question ids are not unique")
    rank, world = shard
    path = part_path(out_dir, name, rank, world)
    path.parent.mkdir(parents=True, exist_ok=True)
    done: dict[str, list[Record]] = {}
    for other in suite_files(out_dir, name):
        if other != path:
            done |= complete_records(read_records(other, note=False), questions, spec.k)
    done |= resume_suite(path, questions, spec.k)
    label = name if world == 1 else f"{name} shard {rank}/{world}"
    if progress and done:
        print(f"[eval {label}] resuming: {len(done)}/{len(questions)} questions complete", file=sys.stderr)
    start, new = time.monotonic(), 0
    for index, chunk in chunks(questions, batch_prompts):
        todo = {q.id for q in chunk} - done.keys()
        if not todo or (owned is not None and index not in owned):
            continue
        records = sample_chunk(engine, chunk, todo, k=spec.k, seed=chunk_seed(seed, name, index), **sample_args)
        append_jsonl(path, records)
        for record in records:
            done.setdefault(record["question_id"], []).append(record)
        new += len(todo)
        on_chunk()
        if progress:
            report_progress(label, len(done), len(questions), new, time.monotonic() - start)


def merge_suite(out_dir: Path, name: str, spec: SuiteSpec, questions: list[Question]) -> dict:
    """Write out_dir/<name>.jsonl from every file of the suite, in suite order; return its summary entry."""
    done: dict[str, list[Record]] = {}
    for path in suite_files(out_dir, name):
        done |= complete_records(read_records(path), questions, spec.k)
    missing = [q.id for q in questions if q.id not in done]
    if missing:
        raise RuntimeError(f"suite '{name}': no complete records of questions {missing[:5]} after every shard")
    atomic_write_text(out_dir / f"{name}.jsonl", "".join(json.dumps(r) + "\n" for q in questions for r in done[q.id]))
    return suite_summary(spec, questions, done)


def evaluate_model(
    engine: Sampler,
    *,
    suites: dict[str, tuple[SuiteSpec, list[Question]]],
    render_prompt: Callable[[str], list[int]],
    decode: Callable[[list[int]], str],
    out_dir: str | Path,
    sampling: Any,
    seed: int,
    batch_prompts: int,
    model: str = "",
    mode: str = "",
    thinking: bool = False,
    progress: bool = True,
    shard: tuple[int, int] = (0, 1),
    shard_lost: Callable[[int], str | None] = lambda rank: None,
    grading_workers: int | None = None,
    on_chunk: Callable[[], None] = lambda: None,
) -> dict | None:
    """Avg@K evaluation of the engine's model on `suites`; writes records and summary.json.

    render_prompt(question) -> prompt token ids; decode(response ids) -> text (keep
    `</think>` in it). `thinking=True` when the prompt opens the think block itself, so a
    response without `</think>` has no answer. `shard` = (rank, world): this process samples its
    chunks of the evaluation (eval/shards.py); rank 0 then waits for the others, merges and returns
    the summary dict, the other ranks return None; `shard_lost(rank)` says why shard `rank` ended unfinished
    (eval/shards.py: wait_for_shards); `grading_workers`: math-verify worker processes (None: one a core, at most 8);
    `on_chunk()`: after each chunk this shard samples, and on each look rank 0 takes while it waits for the others
    (a watchdog's beat: gropd/train/watchdog.py).
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rank, world = shard
    plan = [
        (name, index, len(chunk) * spec.k * (spec.expected_tokens or 1))  # expected tokens (eval/shards.py)
        for name, (spec, qs) in suites.items()
        for index, chunk in chunks(qs, batch_prompts)
    ]
    owners = assign_chunks([cost for _, _, cost in plan], world)
    mine = {(name, index) for (name, index, _), owner in zip(plan, owners, strict=True) if owner == rank}
    with Grader(thinking=thinking, workers=grading_workers) as grader:

        def sample_suites(everything: bool) -> None:
            for name, (spec, questions) in suites.items():
                evaluate_suite(
                    engine,
                    name,
                    spec,
                    questions,
                    out_dir=out,
                    batch_prompts=batch_prompts,
                    seed=seed,
                    progress=progress,
                    shard=shard,
                    owned=None if everything else {index for suite, index in mine if suite == name},
                    on_chunk=on_chunk,
                    render_prompt=render_prompt,
                    decode=decode,
                    sampling=sampling,
                    grader=grader,
                )

        sample_suites(everything=False)
        if rank:
            mark_done(out, rank, world)
            return None
        if world > 1:
            wait_for_shards(out, world, lost=shard_lost, on_poll=on_chunk)
            sample_suites(everything=True)  # whatever no shard left on disk (normally nothing)
    entries = {name: merge_suite(out, name, spec, questions) for name, (spec, questions) in suites.items()}
    remove_shards(out)
    summary = {
        "model": model,
        "mode": mode,
        "suites": entries,
        "macro": macro({name: entry["avg_at_k"] for name, entry in entries.items()}),
    }
    atomic_write_text(out / "summary.json", json.dumps(summary, indent=2) + "\n")
    return summary

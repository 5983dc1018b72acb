"""Evaluation suites: the declarative records of experiments/suites.yaml and their questions.

A suite is one frozen record (source, revision, fields, answer reader, K, paper count,
version). `load_suite_manifest` reads the records of one profile; `load_questions`
turns a record into `Question`s:

    hub source    datasets.load_dataset(repo, config, split, revision) for each config,
                  rows concatenated in config order; question = row[question_field],
                  answer = reader(row[answer_field]) with reader plain: str(v), first: str(v[0]);
                  id = str(row[id_field]), or the row's index in the concatenation when null
    tiny source   eval.tiny_tasks.eval_questions(task, n)  (n = the caller's `first + questions`; all 1,000 when None)
    local_jsonl   one JSON object per line with question, answer and optional id

then keeps the record's `ids` (in that order) when given, then `questions` of them from index `first` on
(the run's eval.first_question: the tiny profile evaluates on a split that no choice has seen).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from fileio import load_yaml

log = logging.getLogger(__name__)


class SuiteError(ValueError):
    """A suite record or its data is unusable; the message names the file/suite and key."""


class HubSource(BaseModel):
    """Questions from a Hub dataset at a pinned revision."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["hub"]
    repo: str
    revision: str
    configs: tuple[str, ...] = Field(min_length=1)
    split: str
    question_field: str
    answer_field: str
    answer_reader: Literal["plain", "first"]
    id_field: str | None


class TinySource(BaseModel):
    """Questions from a generated tiny arithmetic task (eval.tiny_tasks)."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    kind: Literal["tiny"]
    task: str


class SuiteSpec(BaseModel):
    """One suite record; `name` is its key in the manifest."""

    model_config = ConfigDict(extra="forbid", frozen=True, coerce_numbers_to_str=True)
    name: str
    title: str
    k: int = Field(ge=1)
    paper_questions: int | None = Field(default=None, ge=1)
    version: int = Field(ge=1)
    source: Annotated[HubSource | TinySource, Field(discriminator="kind")]
    local_jsonl: str | None = None
    ids: tuple[str, ...] | None = None
    expected_tokens: int | None = Field(default=None, ge=1)


@dataclass(frozen=True)
class Question:
    """One evaluation question with its gold answer as the source stores it."""

    id: str
    question: str
    answer: str


def _format_validation(path: Path, where: str, err: ValidationError) -> str:
    lines = [f"{path}: invalid suite record '{where}':"]
    for item in err.errors():
        key = ".".join(str(part) for part in (where, *item["loc"]))
        lines.append(f"  {key}: {item['msg']}")
    return "\n".join(lines)


def load_suite_manifest(path: str | Path, profile: str) -> dict[str, SuiteSpec]:
    """The suite records of `profile` ('paper' or 'tiny') in manifest order.

    A relative `local_jsonl` is resolved against the manifest's directory.
    """
    path = Path(path)
    try:
        data = load_yaml(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise SuiteError(f"{path}: cannot read suites manifest: {exc}") from exc
    if not isinstance(data, dict) or profile not in data:
        found = sorted(data) if isinstance(data, dict) else type(data).__name__
        raise SuiteError(f"{path}: expected a top-level '{profile}:' section, found {found}")
    section = data[profile]
    if not isinstance(section, dict) or not section:
        raise SuiteError(f"{path}: '{profile}' must map suite keys to records")
    specs = {}
    for name, record in section.items():
        where = f"{profile}.{name}"
        if not isinstance(record, dict):
            raise SuiteError(f"{path}: '{where}' must be a mapping, got {type(record).__name__}")
        if "name" in record:
            raise SuiteError(f"{path}: '{where}.name' is not allowed (the key is the name)")
        record = dict(record)
        if record.get("local_jsonl"):
            record["local_jsonl"] = str((path.parent / record["local_jsonl"]).resolve())
        try:
            specs[str(name)] = SuiteSpec(name=str(name), **record)
        except ValidationError as exc:
            raise SuiteError(_format_validation(path, where, exc)) from exc
    return specs


def read_answer(value: Any, reader: str) -> str:
    """Gold answer text: plain -> str(value); first -> str(value[0]) (e.g. final_answer[0])."""
    if reader == "first":
        if not isinstance(value, (list, tuple)) or not value:
            raise SuiteError(f"answer_reader 'first' expects a non-empty list, got {value!r}")
        value = value[0]
    return str(value).strip()


def rows_to_questions(rows: list[dict], source: HubSource, suite: str) -> list[Question]:
    """Map a source's own fields onto Questions (see the module docstring)."""
    questions = []
    for index, row in enumerate(rows):
        for field in (source.question_field, source.answer_field, source.id_field):
            if field is not None and field not in row:
                raise SuiteError(
                    f"suite '{suite}': row {index} of {source.repo} has no field '{field}' (fields: {sorted(row)})"
                )
        qid = str(row[source.id_field]) if source.id_field else str(index)
        answer = read_answer(row[source.answer_field], source.answer_reader)
        questions.append(Question(qid, str(row[source.question_field]), answer))
    return questions


def _hub_rows(spec: SuiteSpec, revision: str, cache_dir: str | None) -> list[dict]:
    """All rows of the source's configs at `revision`, concatenated (cached by datasets)."""
    import datasets

    source = spec.source
    rows: list[dict] = []
    for config in source.configs:
        try:
            table = datasets.load_dataset(
                source.repo,
                None if config == "default" else config,
                split=source.split,
                revision=revision,
                cache_dir=cache_dir,
            )
        except Exception as exc:
            offline = os.environ.get("HF_HUB_OFFLINE") or os.environ.get("HF_DATASETS_OFFLINE")
            hint = (
                "offline mode is on and no cached copy was found; run once with Hub access "
                "(or point cache_dir at a cache holding it)"
                if offline
                else "check the repo, config, split and revision, and Hub access"
            )
            raise SuiteError(
                f"suite '{spec.name}': cannot load {source.repo} config '{config}' "
                f"split '{source.split}' at revision '{revision}': {hint} ({exc})"
            ) from exc
        rows.extend(dict(row) for row in table)
    return rows


def _jsonl_questions(spec: SuiteSpec) -> list[Question]:
    path = Path(spec.local_jsonl or "")
    questions = []
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise SuiteError(f"suite '{spec.name}': cannot read local_jsonl {path}: {exc}") from exc
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            questions.append(Question(str(row.get("id", number - 1)), row["question"], str(row["answer"])))
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise SuiteError(f"{path}:{number}: expected a JSON object with 'question' and 'answer' ({exc})") from exc
    return questions


def _tiny_questions(spec: SuiteSpec, upto: int | None) -> list[Question]:
    """The first `upto` held-out questions of the tiny task; None: all of them (tasks.EVAL_POOL)."""
    from eval import tiny_tasks as tasks

    rows = tasks.eval_questions(spec.source.task, tasks.EVAL_POOL if upto is None else min(upto, tasks.EVAL_POOL))
    return [Question(str(r["id"]), str(r["question"]), str(r["answer"])) for r in rows]


def select_questions(
    found: list[Question], ids: tuple[str, ...] | None, questions: int | None, suite: str, first: int = 0
) -> list[Question]:
    """Keep `ids` (in their order) when given, then `questions` of them from index `first` on (None: all)."""
    if ids is not None:
        by_id = {q.id: q for q in found}
        missing = [i for i in ids if i not in by_id]
        if missing:
            raise SuiteError(f"suite '{suite}': ids not in the source: {missing[:10]}")
        found = [by_id[i] for i in ids]
    end = len(found) if questions is None else first + questions
    if first >= len(found) or end > len(found):
        raise SuiteError(
            f"suite '{suite}': questions {first}..{end - 1} (eval.first_question, eval.questions) run past its "
            f"{len(found)} questions"
        )
    return found[first:end]


def question_pool(spec: SuiteSpec) -> int | None:
    """How many questions the suite offers before eval.first_question and eval.questions cut it, when that is
    known without loading a Hub dataset: its `ids`, a tiny task's EVAL_POOL, a local JSONL file's lines;
    None for a Hub dataset (known once loaded: select_questions checks the range then)."""
    from eval import tiny_tasks

    if spec.ids is not None:
        return len(spec.ids)
    if spec.local_jsonl:
        return len(_jsonl_questions(spec))
    return tiny_tasks.EVAL_POOL if spec.source.kind == "tiny" else None


def count_note(spec: SuiteSpec, used: int) -> str | None:
    """A note when the count used differs from the paper's, else None."""
    if spec.paper_questions is None or used == spec.paper_questions:
        return None
    return f"suite '{spec.name}': using {used} questions (paper: {spec.paper_questions})"


def load_questions(
    spec: SuiteSpec,
    *,
    revision: str | None = None,
    cache_dir: str | None = None,
    questions: int | None = None,
    first: int = 0,
) -> list[Question]:
    """The suite's questions `[first, first + questions)` (select_questions); `revision` (e.g. from the lock
    file) overrides the record's.

    Logs a warning when the count differs from `paper_questions` (see `count_note`).
    """
    loaders: dict[str, Callable[[], list[Question]]] = {
        "jsonl": lambda: _jsonl_questions(spec),
        "tiny": lambda: _tiny_questions(spec, None if questions is None or spec.ids else first + questions),
        "hub": lambda: rows_to_questions(
            _hub_rows(spec, revision or spec.source.revision, cache_dir), spec.source, spec.name
        ),
    }
    found = loaders["jsonl" if spec.local_jsonl else spec.source.kind]()
    chosen = select_questions(found, spec.ids, questions, spec.name, first)
    if not chosen:
        raise SuiteError(f"suite '{spec.name}': no questions loaded")
    note = count_note(spec, len(chosen))
    if note:
        log.warning(note)
    return chosen

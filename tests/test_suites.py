"""Suite manifest validation and question loading, without the network (eval/suites.py)."""

from __future__ import annotations

import importlib
import json
import logging
import sys
import types
from pathlib import Path

import datasets
import pytest

from eval.suites import (
    Question,
    SuiteError,
    SuiteSpec,
    count_note,
    load_questions,
    load_suite_manifest,
    read_answer,
)

MANIFEST = Path(__file__).resolve().parents[1] / "experiments" / "suites.yaml"


def _hub_spec(**source) -> SuiteSpec:
    base = dict(
        kind="hub",
        repo="org/set",
        revision="main",
        configs=["default"],
        split="test",
        question_field="question",
        answer_field="answer",
        answer_reader="plain",
        id_field=None,
    )
    return SuiteSpec(name="demo", title="Demo", k=4, paper_questions=3, version=1, source={**base, **source})


def _fake_loader(tables: dict, calls: list):
    def load_dataset(repo, config, *, split, revision, cache_dir):
        calls.append((repo, config, split, revision))
        return tables[config]

    return load_dataset


def test_paper_manifest_matches_table5():
    specs = load_suite_manifest(MANIFEST, "paper")
    table5 = {
        "aime24": (30, 32),
        "aime25": (30, 32),
        "amc23": (40, 32),
        "math500": (500, 8),
        "minerva": (272, 8),
        "olympiadbench": (170, 8),
    }
    assert {n: (s.paper_questions, s.k) for n, s in specs.items()} == table5
    assert sum(s.paper_questions for s in specs.values()) == 1042
    assert specs["aime25"].source.configs == ("AIME2025-I", "AIME2025-II")
    assert specs["olympiadbench"].source.answer_reader == "first"


def test_tiny_manifest():
    specs = load_suite_manifest(MANIFEST, "tiny")
    assert list(specs) == ["add", "sub", "mul", "add3", "mixed", "muladd"]
    assert all(s.source.kind == "tiny" and s.source.task == n for n, s in specs.items())
    assert all(s.k == 4 and s.paper_questions is None for s in specs.values())


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ("{title: X, k: 4, version: 1, colour: red, source: {kind: tiny, task: add}}", "tiny.s1.colour"),
        ("{title: X, k: zero, version: 1, source: {kind: tiny, task: add}}", "tiny.s1.k"),
        ("{title: X, k: 0, version: 1, source: {kind: tiny, task: add}}", "tiny.s1.k"),
        ("{title: X, k: 4, version: 1, source: {kind: ftp, task: add}}", "tiny.s1.source"),
        ("{title: X, k: 4, version: 1, source: {kind: hub, repo: a/b}}", "tiny.s1.source.hub.split"),
        ("[1, 2]", "'tiny.s1' must be a mapping"),
    ],
)
def test_manifest_errors_name_file_and_key(tmp_path, record, message):
    path = tmp_path / "suites.yaml"
    path.write_text(f"tiny:\n  s1: {record}\n")
    with pytest.raises(SuiteError) as err:
        load_suite_manifest(path, "tiny")
    assert str(path) in str(err.value) and message in str(err.value)


def test_manifest_missing_profile(tmp_path):
    path = tmp_path / "suites.yaml"
    path.write_text("paper: {}\n")
    with pytest.raises(SuiteError, match="top-level 'tiny:' section"):
        load_suite_manifest(path, "tiny")


def test_read_answer():
    assert read_answer(27.0, "plain") == "27.0"
    assert read_answer(["$\\frac{1}{2}$", "x"], "first") == "$\\frac{1}{2}$"
    with pytest.raises(SuiteError):
        read_answer([], "first")


def test_local_jsonl_replaces_source(tmp_path):
    rows = [{"id": "a", "question": "1+1?", "answer": "2"}, {"question": "2+2?", "answer": 4}]
    (tmp_path / "qs.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    (tmp_path / "suites.yaml").write_text(
        "paper:\n  s:\n    title: S\n    k: 2\n    paper_questions: 2\n    version: 1\n"
        "    local_jsonl: qs.jsonl\n"
        "    source: {kind: hub, repo: a/b, revision: main, configs: [default], split: test,\n"
        "             question_field: q, answer_field: a, answer_reader: plain, id_field: null}\n"
    )
    spec = load_suite_manifest(tmp_path / "suites.yaml", "paper")["s"]
    assert load_questions(spec) == [Question("a", "1+1?", "2"), Question("1", "2+2?", "4")]


def test_hub_configs_concatenated_and_fields_mapped(monkeypatch):
    calls = []
    tables = {
        "I": [{"question": "q1", "answer": "1"}, {"question": "q2", "answer": "2"}],
        "II": [{"question": "q3", "answer": 3}],
    }
    monkeypatch.setattr(datasets, "load_dataset", _fake_loader(tables, calls))
    spec = _hub_spec(configs=["I", "II"])
    got = load_questions(spec, revision="abc123", cache_dir="/tmp/none")
    assert got == [Question("0", "q1", "1"), Question("1", "q2", "2"), Question("2", "q3", "3")]
    assert calls == [("org/set", "I", "test", "abc123"), ("org/set", "II", "test", "abc123")]


def test_hub_first_reader_ids_and_count_note(monkeypatch, caplog):
    rows = [{"id": 10 + i, "problem": f"p{i}", "final_answer": [f"${i}$"]} for i in range(5)]
    monkeypatch.setattr(datasets, "load_dataset", _fake_loader({None: rows}, []))
    spec = _hub_spec(question_field="problem", answer_field="final_answer", answer_reader="first", id_field="id")
    with caplog.at_level(logging.WARNING):
        full = load_questions(spec)
    assert [q.answer for q in full] == ["$0$", "$1$", "$2$", "$3$", "$4$"]
    assert "using 5 questions (paper: 3)" in caplog.text
    chosen = spec.model_copy(update={"ids": ("13", "10", "12")})
    assert [q.id for q in load_questions(chosen)] == ["13", "10", "12"]
    assert count_note(chosen, 3) is None
    assert [q.question for q in load_questions(spec, questions=2)] == ["p0", "p1"]
    with pytest.raises(SuiteError, match="ids not in the source"):
        load_questions(spec.model_copy(update={"ids": ("99",)}))


def test_hub_missing_field_is_named(monkeypatch):
    monkeypatch.setattr(datasets, "load_dataset", _fake_loader({None: [{"problem": "p", "answer": "1"}]}, []))
    with pytest.raises(SuiteError, match="no field 'question'"):
        load_questions(_hub_spec())


def test_offline_without_cache_names_suite_repo_revision(monkeypatch):
    def offline(*args, **kwargs):
        raise ConnectionError("Couldn't reach the Hub (offline mode is enabled)")

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(SuiteError) as err:
        load_questions(_hub_spec(revision="main"), revision="0123abcd")
    message = str(err.value)
    assert "suite 'demo'" in message and "org/set" in message and "'0123abcd'" in message
    assert "offline mode is on and no cached copy" in message


def test_tiny_branch_uses_eval_questions(monkeypatch):
    calls = []

    def eval_questions(task, n):
        calls.append((task, n))
        return [{"id": f"{task}-{i}", "question": f"{i}+1=", "answer": str(i + 1)} for i in range(n)]

    fake = types.ModuleType("eval.tiny_tasks")
    fake.eval_questions = eval_questions
    fake.EVAL_POOL = 5
    monkeypatch.setitem(sys.modules, "eval.tiny_tasks", fake)
    monkeypatch.setattr(importlib.import_module("eval"), "tiny_tasks", fake, raising=False)
    spec = load_suite_manifest(MANIFEST, "tiny")["add3"]
    got = load_questions(spec, questions=3)
    assert calls == [("add3", 3)]
    assert got[2] == Question("add3-2", "2+1=", "3")
    assert len(load_questions(spec)) == 5 and calls[-1] == ("add3", 5)  # no count: the whole held-out pool

"""The evaluation runner with a fake engine: Avg@K by hand, records, summary and resume."""

from __future__ import annotations

import json

import pytest

from eval.runner import chunk_seed, evaluate_model, read_records
from eval.shards import ShardLostError, assign_chunks, wait_for_shards
from eval.suites import Question, SuiteSpec
from gropd.config import ConfigError, RunFileError
from gropd.model.rollout.base import RolloutBatch, SamplingSettings
from gropd.runs.evaluation import claim_shard

SAMPLING = SamplingSettings(temperature=1.0, top_p=1.0, max_new_tokens=64)
# correct samples per question: sample j of question i is correct iff j < CORRECT[suite][i]
CORRECT = {"s4": [4, 2, 0, 1, 3], "s2": [1, 2]}


def render(question: str) -> list[int]:
    return [ord(c) for c in question]


def decode(ids: list[int]) -> str:
    return "".join(chr(i) for i in ids)


class FakeEngine:
    """Response j to prompt "<suite>/<i>" is `s<seed> \\boxed{7}` if j < CORRECT else `\\boxed{8}`."""

    def __init__(self, fail_after: int | None = None) -> None:
        self.calls: list[tuple[list[str], int, int]] = []
        self.fail_after = fail_after

    def generate(self, prompt_ids, n, sampling, seed):
        if self.fail_after is not None and len(self.calls) >= self.fail_after:
            raise KeyboardInterrupt("simulated interruption")
        prompts = [decode(p) for p in prompt_ids]
        self.calls.append((prompts, n, seed))
        responses = []
        for prompt in prompts:
            suite, index = prompt.split("/")
            for j in range(n):
                answer = "7" if j < CORRECT[suite][int(index)] else "8"
                responses.append(render(f"s{seed:010d} \\boxed{{{answer}}}"))
        rows = len(responses)
        return RolloutBatch([p for p in prompt_ids for _ in range(n)], responses, ["stop"] * rows)

    def sync_weights(self, model) -> None:  # pragma: no cover - protocol completeness
        pass


def _suite(name: str, k: int, expected_tokens: int | None = None) -> tuple[SuiteSpec, list[Question]]:
    source = {"kind": "tiny", "task": "add"}
    spec = SuiteSpec(
        name=name, title=name, k=k, paper_questions=6, version=1, source=source, expected_tokens=expected_tokens
    )
    return spec, [Question(f"q{i}", f"{name}/{i}", "7") for i in range(len(CORRECT[name]))]


SUITES = {"s4": _suite("s4", 4), "s2": _suite("s2", 2)}


def _run(engine, out_dir, progress=False, shard=(0, 1), suites=SUITES):
    return evaluate_model(
        engine,
        suites=suites,
        render_prompt=render,
        decode=decode,
        out_dir=out_dir,
        sampling=SAMPLING,
        seed=3,
        batch_prompts=2,
        model="fake",
        mode="nothink",
        progress=progress,
        shard=shard,
    )


def test_summary_by_hand(tmp_path, capsys):
    summary = _run(FakeEngine(), tmp_path, progress=True)
    s4, s2 = summary["suites"]["s4"], summary["suites"]["s2"]
    # s4: (4/4 + 2/4 + 0/4 + 1/4 + 3/4) / 5 = 50%; s2: (1/2 + 2/2) / 2 = 75%
    assert s4["avg_at_k"] == pytest.approx(50.0) and s2["avg_at_k"] == pytest.approx(75.0)
    assert summary["macro"] == pytest.approx(62.5)
    # pass@K: a question passes if any sample is correct -> s4 4/5, s2 2/2
    assert s4["pass_at_k"] == pytest.approx(80.0) and s2["pass_at_k"] == pytest.approx(100.0)
    # maj@K: s4 majorities 7 (4-0), tie 2-2 -> first sample "7", 8, 8 (3-1), 7 -> 3/5
    assert s4["maj_at_k"] == pytest.approx(60.0) and s2["maj_at_k"] == pytest.approx(100.0)
    # every response is "s" + 10 digits + " " + "\boxed{7}" = 1 + 10 + 1 + 9 = 21 tokens
    assert s4["mean_tokens"] == 21.0
    assert s4 | {"avg_at_k": 0, "pass_at_k": 0, "maj_at_k": 0} == {
        "avg_at_k": 0,
        "k": 4,
        "questions": 5,
        "paper_questions": 6,
        "mean_tokens": 21.0,
        "pass_at_k": 0,
        "maj_at_k": 0,
        "timeouts": 0,
    }
    assert json.loads((tmp_path / "summary.json").read_text()) == summary
    assert summary["model"] == "fake" and summary["mode"] == "nothink"
    assert "[eval s4] 5/5 questions" in capsys.readouterr().err


def test_records_layout_and_chunk_seeds(tmp_path):
    engine = FakeEngine()
    _run(engine, tmp_path)
    records = read_records(tmp_path / "s4.jsonl")
    assert len(records) == 5 * 4
    first = records[0]
    assert set(first) == {
        "question_id",
        "sample",
        "response",
        "extracted",
        "correct",
        "tokens",
        "finish_reason",
        "timed_out",
    }
    assert (first["question_id"], first["sample"], first["extracted"], first["correct"]) == ("q0", 0, "7", True)
    # s4 in chunks of 2 prompts: 3 calls, each seeded by its chunk
    seeds = [seed for _, _, seed in engine.calls[:3]]
    assert seeds == [chunk_seed(3, "s4", c) for c in range(3)] and len(set(seeds)) == 3
    assert [prompts for prompts, _, _ in engine.calls[:3]] == [["s4/0", "s4/1"], ["s4/2", "s4/3"], ["s4/4"]]


def test_resume_after_interruption(tmp_path):
    reference = _run(FakeEngine(), tmp_path / "ref")
    out = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        _run(FakeEngine(fail_after=2), out)  # s4 chunks 0 and 1 are written, then it stops
    assert len(read_records(out / "s4.jsonl")) == 4 * 4 and not (out / "summary.json").exists()
    # a torn write of chunk 2: one full record of q4 and half of the next
    with (out / "s4.jsonl").open("a") as handle:
        full = read_records(tmp_path / "ref" / "s4.jsonl")[16]
        handle.write(json.dumps(full) + "\n" + json.dumps(full)[:25])

    engine = FakeEngine()
    resumed = _run(engine, out)
    assert resumed == reference
    # only the missing chunk of s4 and the two chunks of s2 were sampled again
    assert [prompts for prompts, _, _ in engine.calls] == [["s4/4"], ["s2/0", "s2/1"]]
    for name in SUITES:
        records = read_records(out / f"{name}.jsonl")
        keys = [(r["question_id"], r["sample"]) for r in records]
        assert len(keys) == len(set(keys))  # no question graded or written twice
        assert records == read_records(tmp_path / "ref" / f"{name}.jsonl")

    again = FakeEngine()
    assert _run(again, out) == reference and again.calls == []  # finished: nothing re-run


def test_chunks_go_to_the_least_loaded_shard_largest_first():
    # s4's chunks cost 2x4, 2x4, 1x4 samples, s2's 2x2: by hand, largest first, ties to the lower rank
    assert assign_chunks([8, 8, 4, 4], 1) == [0, 0, 0, 0]
    assert assign_chunks([8, 8, 4, 4], 2) == [0, 1, 0, 1]
    assert assign_chunks([8, 8, 4, 4], 3) == [0, 1, 2, 2]
    assert assign_chunks([4, 8, 8], 2) == [0, 0, 1]


def test_two_shards_write_the_records_and_summary_of_one(tmp_path):
    """Shard 1 of 2 samples its chunks and marks them done; shard 0 samples the rest, merges, and the
    suite files and summary are those of one process, byte for byte; every chunk sampled once, with
    its own chunk seed."""
    one = FakeEngine()
    reference = _run(one, tmp_path / "one")
    out = tmp_path / "two"
    second, first = FakeEngine(), FakeEngine()
    assert _run(second, out, shard=(1, 2)) is None
    assert (out / "shards" / "done.1of2").exists() and not (out / "summary.json").exists()
    assert _run(first, out, shard=(0, 2)) == reference
    assert sorted(first.calls + second.calls) == sorted(one.calls) and first.calls and second.calls
    assert [seed for _, _, seed in second.calls] == [chunk_seed(3, "s4", 1), chunk_seed(3, "s2", 0)]
    for name in (*SUITES, "summary"):
        suffix = "json" if name == "summary" else "jsonl"
        assert (out / f"{name}.{suffix}").read_bytes() == (tmp_path / "one" / f"{name}.{suffix}").read_bytes()
    assert not (out / "shards").exists()


def test_rank_0_stops_waiting_for_a_shard_that_ended_unfinished(tmp_path):
    """wait_for_shards asks `lost` about every shard still unmarked: a reason stops the wait at once (before: it
    waited for ever, "waits for done.9of16" every minute until the job's time limit); a shard that marked its
    chunks is never asked about, whatever `lost` would say."""
    (tmp_path / "shards").mkdir()
    (tmp_path / "shards" / "done.2of3").write_text("")
    asked = []

    def lost(rank):
        asked.append(rank)
        return "pid 7 on host b is gone: its lock is free" if rank == 1 else None

    with pytest.raises(ShardLostError, match=r"shard 1 of 3 ended without marking its chunks done \(pid 7 on host b"):
        wait_for_shards(tmp_path, 3, lost=lost)
    assert asked == [1]
    (tmp_path / "shards" / "done.1of3").write_text("")
    wait_for_shards(tmp_path, 3, lost=lambda rank: "would stop it")


def test_shards_balance_the_tokens_a_chunk_is_expected_to_generate(tmp_path):
    """s2's one chunk (2 questions x K 2) is expected to generate 2 x 2 x 1000 = 4,000 tokens, s4's three chunks
    8 x 10, 8 x 10 and 4 x 10: by expected tokens (largest first, least-loaded shard) s2's chunk is shard 0's alone
    and shard 1 samples all of s4 (by questions x K, 8, 8, 4, 4, shard 1 would also take s2's long chunk).
    The records are still those of one process."""
    suites = {"s4": _suite("s4", 4, expected_tokens=10), "s2": _suite("s2", 2, expected_tokens=1000)}
    reference = _run(FakeEngine(), tmp_path / "one", suites=suites)
    out, second = tmp_path / "two", FakeEngine()
    assert _run(second, out, shard=(1, 2), suites=suites) is None
    assert [prompts for prompts, _, _ in second.calls] == [["s4/0", "s4/1"], ["s4/2", "s4/3"], ["s4/4"]]
    first = FakeEngine()
    assert _run(first, out, shard=(0, 2), suites=suites) == reference
    assert [prompts for prompts, _, _ in first.calls] == [["s2/0", "s2/1"]]
    for name in suites:
        assert (out / f"{name}.jsonl").read_bytes() == (tmp_path / "one" / f"{name}.jsonl").read_bytes()


def test_every_paper_suite_has_a_length_estimate_for_its_shards(experiments):
    from eval.suites import load_suite_manifest

    specs = load_suite_manifest(experiments / "suites.yaml", "paper")
    lengths = {name: spec.expected_tokens for name, spec in specs.items()}
    assert all(lengths.values()), lengths
    assert min(lengths["aime24"], lengths["amc23"]) > max(lengths["math500"], lengths["minerva"])


def test_an_interrupted_sharded_evaluation_resumes_on_one_process(tmp_path):
    reference = _run(FakeEngine(), tmp_path / "ref")
    out = tmp_path / "run"
    with pytest.raises(KeyboardInterrupt):
        _run(FakeEngine(fail_after=1), out, shard=(1, 2))  # s4's chunk 1 written, then it stops
    engine = FakeEngine()
    assert _run(engine, out) == reference
    assert [prompts for prompts, _, _ in engine.calls] == [["s4/0", "s4/1"], ["s4/4"], ["s2/0", "s2/1"]]
    for name in SUITES:
        assert read_records(out / f"{name}.jsonl") == read_records(tmp_path / "ref" / f"{name}.jsonl")


def test_read_records_rejects_corruption_before_the_end(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text('{"question_id": "q0"\n{"question_id": "q1", "sample": 0}\n')
    with pytest.raises(RunFileError, match=r"s\.jsonl: line 1 is not valid JSON .*; delete .*s\.jsonl \(its suite"):
        read_records(path)


def test_a_shard_takes_its_local_gpu_and_leaves_the_launchers_world():
    launched = {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "MASTER_PORT": "29501"}
    environ = {**launched, "CUDA_VISIBLE_DEVICES": "4,5", "PATH": "/bin"}
    assert claim_shard(environ) == (3, 4)
    assert environ == {"CUDA_VISIBLE_DEVICES": "5", "PATH": "/bin"}  # no RANK / WORLD_SIZE for anything to join
    bare = {"PATH": "/bin"}
    assert claim_shard(bare) == (0, 1) and bare == {"PATH": "/bin"}


@pytest.mark.parametrize(
    ("environ", "names"),
    [
        ({"RANK": "abc"}, "RANK"),
        ({"WORLD_SIZE": "0"}, "RANK, WORLD_SIZE"),
        ({"RANK": "3", "WORLD_SIZE": "2"}, "RANK, WORLD_SIZE"),
        ({"LOCAL_RANK": "7", "LOCAL_WORLD_SIZE": "4"}, "LOCAL_RANK, LOCAL_WORLD_SIZE"),
        ({"LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "CUDA_VISIBLE_DEVICES": "0"}, "LOCAL_RANK, CUDA_VISIBLE_DEVICES"),
    ],
)
def test_a_launcher_environment_that_names_no_shard_is_a_clear_error(environ, names):
    """A rank that is not a count, or not below its world, is a ConfigError naming the variables (exit 2 at the
    command line), not a traceback, nor an evaluation that marks its run failed."""
    with pytest.raises(ConfigError, match=f"environment: {names}:"):
        claim_shard(dict(environ))

"""tools/compare_runs.py: the runs two results directories share, compared bit for bit (timings aside), a collapsed
run (never evaluated) included."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("compare_runs", REPO / "tools" / "compare_runs.py")
compare_runs = importlib.util.module_from_spec(spec)
spec.loader.exec_module(compare_runs)

ROWS = [{"step": 1, "loss": 0.5, "time_update_s": 1.0}, {"step": 2, "loss": 0.25, "time_update_s": 1.0}]


def write(results: Path, run_id: str, state: str, rows: list[dict], macro: float | None) -> None:
    """A run as compare_runs reads it: status.json, metrics.jsonl and, when `macro` is given, eval/summary.json."""
    run = results / "tiny" / run_id
    run.mkdir(parents=True)
    (run / "status.json").write_text(json.dumps({"status": state}))
    (run / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    if macro is not None:
        (run / "eval").mkdir()
        (run / "eval" / "summary.json").write_text(json.dumps({"model": str(run), "macro": macro, "suites": {}}))


def test_identical_runs_pass_whatever_their_timings_and_a_collapsed_run_is_compared_by_its_steps(tmp_path, capsys):
    for name, timing in (("mine", 1.0), ("theirs", 9.0)):
        rows = [{**row, "time_update_s": timing} for row in ROWS]
        write(tmp_path / name, "a", "finished", rows, 40.0)
        write(tmp_path / name, "b", "collapsed", rows, None)
    write(tmp_path / "mine", "only_mine", "finished", ROWS, 1.0)  # not shared: not compared
    assert compare_runs.main([str(tmp_path / "mine"), str(tmp_path / "theirs")]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "a: identical",
        "b: identical",
        "2 of 2 shared finished runs identical in training and evaluation (2 bit for bit, 0 with monitoring "
        "correlations within 1e-14)",
    ]


def test_a_changed_metric_an_extra_step_or_an_evaluation_one_side_lacks_is_reported_and_fails(tmp_path, capsys):
    write(tmp_path / "mine", "metric", "finished", ROWS, 40.0)
    write(tmp_path / "theirs", "metric", "finished", [ROWS[0], {**ROWS[1], "loss": 0.3}], 40.0)
    write(tmp_path / "mine", "steps", "finished", ROWS, 40.0)
    write(tmp_path / "theirs", "steps", "finished", ROWS[:1], 40.0)
    write(tmp_path / "mine", "macro", "finished", ROWS, 40.0)
    write(tmp_path / "theirs", "macro", "collapsed", ROWS, None)
    assert compare_runs.main([str(tmp_path / "mine"), str(tmp_path / "theirs")]) == 1
    assert capsys.readouterr().out.splitlines() == [
        "macro: differs at evaluation: Macro 40.0 vs None (None: not evaluated)",
        "metric: differs at step 2: loss 0.25 vs 0.3",
        "steps: differs at 2 steps vs 1",
        "0 of 3 shared finished runs identical in training and evaluation (0 bit for bit, 0 with monitoring "
        "correlations within 1e-14)",
    ]


def test_only_the_named_monitoring_correlations_may_differ_and_only_in_their_last_digits(tmp_path, capsys):
    """The one exception (gropd/record/record_compare.py): Pearson and Spearman of a step within 1e-14, as the
    committed AVX-512 OpenBLAS values against a Zen 3's (issue 61: -0.22275457073959054 vs -0.2227545707395905)."""
    committed = {"step": 1, "loss": 0.5, "pearson_score_len": -0.2227545707395905, "spearman_score_reward": 0.1}
    zen3 = {**committed, "pearson_score_len": -0.22275457073959054}
    write(tmp_path / "mine", "last_digit", "finished", [zen3], 40.0)
    write(tmp_path / "theirs", "last_digit", "finished", [committed], 40.0)
    write(tmp_path / "mine", "near_zero", "finished", [{**committed, "spearman_score_reward": 2e-15}], 40.0)
    write(tmp_path / "theirs", "near_zero", "finished", [{**committed, "spearman_score_reward": -1e-15}], 40.0)
    write(tmp_path / "mine", "too_far", "finished", [{**committed, "pearson_score_len": -0.22275457073961}], 40.0)
    write(tmp_path / "theirs", "too_far", "finished", [committed], 40.0)
    write(tmp_path / "mine", "absent", "finished", [{**committed, "pearson_score_len": None}], 40.0)
    write(tmp_path / "theirs", "absent", "finished", [committed], 40.0)
    write(tmp_path / "mine", "loss", "finished", [{**committed, "loss": 0.5 + 1e-16}], 40.0)  # no tolerance here
    write(tmp_path / "theirs", "loss", "finished", [committed], 40.0)
    assert compare_runs.main([str(tmp_path / "mine"), str(tmp_path / "theirs")]) == 1
    assert capsys.readouterr().out.splitlines() == [
        "absent: differs at step 1: pearson_score_len None vs -0.2227545707395905",
        "last_digit: identical in training and evaluation; monitoring correlations within 1e-14",
        "loss: differs at step 1: loss 0.5000000000000001 vs 0.5",
        "near_zero: identical in training and evaluation; monitoring correlations within 1e-14",
        "too_far: differs at step 1: pearson_score_len -0.22275457073961 vs -0.2227545707395905",
        "2 of 5 shared finished runs identical in training and evaluation (0 bit for bit, 2 with monitoring "
        "correlations within 1e-14)",
        "(pearson_score_len, spearman_score_reward: computed through numpy's per-CPU BLAS by runs made before 4b65c01)",
    ]

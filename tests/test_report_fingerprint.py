"""tools/report_fingerprint.py: two builds of the same results give the same bytes (PDF included), and a
changed result changes exactly the artefacts that read it."""

from __future__ import annotations

import importlib.util
import json

import yaml
from report_fixtures import P1, P2, REPO, STEPS, macro_summary, metric_rows, write_experiments, write_run

spec = importlib.util.spec_from_file_location("report_fingerprint", REPO / "tools" / "report_fingerprint.py")
report_fingerprint = importlib.util.module_from_spec(spec)
spec.loader.exec_module(report_fingerprint)


def results_with_table1(root, opd_macro: float):
    fig1 = yaml.safe_load((REPO / "experiments" / "grids" / "fig1.yaml").read_text())
    write_experiments(root, grids={"fig1": {k: v for k, v in fig1.items() if k != "name"}})
    for method, value in (("gropd", 40.0), ("opd", opd_macro)):
        metrics = metric_rows(STEPS, verifier_reward=lambda s: 0.1 * s, mean_response_len=50.0)
        write_run(
            root / "results", "tiny", f"table1__{P1}__{method}", metrics=metrics, eval_summary=macro_summary(value)
        )
    curve = metric_rows(
        STEPS, verifier_reward=0.3, mean_response_len=50.0, pressure_normalised=1.0, pressure_retained=0.5
    )
    for run_id in (f"lambda__{P1}__gropd-lam0.5", f"gamma__{P2}__gropd-lam0.2-gamma1", f"fig1__{P1}__raw"):
        write_run(root / "results", "tiny", run_id, metrics=curve)  # every artefact has a finished run to show
    write_run(root / "results", "tiny", "table6__B1.7-default", eval_summary=macro_summary(20.0))
    return root / "results"


def test_the_same_results_give_the_same_bytes_and_a_changed_result_changes_its_table(tmp_path) -> None:
    results = results_with_table1(tmp_path / "a", opd_macro=38.0)
    first = report_fingerprint.fingerprint(results, "tiny", tmp_path / "a" / "experiments")
    second = report_fingerprint.fingerprint(results, "tiny", tmp_path / "a" / "experiments")
    assert first == second
    assert any(name.endswith(".pdf") for name in first) and any(name.endswith(".png") for name in first)
    opd_summary = results / "tiny" / f"table1__{P1}__opd" / "eval" / "summary.json"
    opd_summary.write_text(json.dumps(macro_summary(39.0)))
    third = report_fingerprint.fingerprint(results, "tiny", tmp_path / "a" / "experiments")
    lines = report_fingerprint.differences(first, third)
    assert lines and all(line.startswith("changed: ") for line in lines)
    assert {"changed: table1.md", "changed: table1.csv"} <= set(lines)
    assert not any(name in line for line in lines for name in ("table3", "table6", "fig3", "fig4", "figure1"))


def test_compare_exits_1_and_names_the_file(tmp_path, capsys) -> None:
    results = results_with_table1(tmp_path, opd_macro=38.0)
    saved = tmp_path / "before.json"
    args = ["--results", str(results), "--experiments", str(tmp_path / "experiments")]
    assert report_fingerprint.main([*args, "--out", str(saved)]) == 0
    assert report_fingerprint.main([*args, "--compare", str(saved)]) == 0
    tampered = json.loads(saved.read_text())
    tampered["table1.md"] = "0" * 64
    saved.write_text(json.dumps(tampered))
    assert report_fingerprint.main([*args, "--compare", str(saved)]) == 1
    assert "changed: table1.md" in capsys.readouterr().out

"""Tables 1–6 rebuilt from results fixtures written here (gropd.report)."""

from __future__ import annotations

import json
import statistics

import pytest
import yaml
from report_fixtures import P1, P2, P3, P4, REPO, report_context, summary, write_experiments, write_run

from gropd.config.errors import ConfigError
from gropd.report import ARTEFACTS, build
from gropd.report.formats import to_latex, to_markdown
from gropd.report.manifest_tables import UNPINNED, build_table3, build_table4, build_table5
from gropd.report.settings import load_settings
from gropd.report.table1 import build_table1
from gropd.report.table2 import build_table2
from gropd.report.table6 import build_table6

T1, T2, T3 = "I4nothink→I1.7nothink", "I32nothink→I1.7nothink", "I4think→B1.7"


def row_of(table, pairing_title, method_prefix):
    return next(row for row in table.rows if row[0].text == pairing_title and row[1].text.startswith(method_prefix))


@pytest.fixture
def table1_world(tmp_path):
    """Tiny profile, suites add/sub/mul. P1: both finished; P2: opd collapsed; P3: running / no summary;
    P4: gropd trained but not evaluated, opd not run."""
    write_experiments(tmp_path)
    res = tmp_path / "results"
    write_run(
        res,
        "tiny",
        f"table1__{P1}__gropd",
        fields={"pairing": P1, "method": "gropd", "lam": 0.25, "gamma": 0.99},
        eval_summary=summary({"add": 50.0, "sub": 30.0, "mul": 20.0}),
    )
    write_run(
        res,
        "tiny",
        f"table1__{P1}__opd",
        fields={"pairing": P1, "method": "opd"},
        eval_summary=summary({"add": 40.0, "sub": 35.0, "mul": 20.0}),
    )
    write_run(
        res,
        "tiny",
        f"table1__{P2}__gropd",
        fields={"pairing": P2, "method": "gropd"},
        eval_summary=summary({"add": 1.004, "sub": 1.004, "mul": 1.012}),
    )
    write_run(
        res,
        "tiny",
        f"table1__{P2}__opd",
        "collapsed",
        fields={"pairing": P2, "method": "opd"},
        collapse_step=37,
        reason="verifier reward fell below 25% of its start",
    )
    write_run(
        res, "tiny", f"table1__{P3}__gropd", "running", fields={"pairing": P3, "method": "gropd"}, step=40, steps=120
    )
    write_run(res, "tiny", f"table1__{P3}__opd", fields={"pairing": P3, "method": "opd"})
    write_run(res, "tiny", f"table1__{P4}__gropd", "trained", fields={"pairing": P4, "method": "gropd"}, step=120)
    return tmp_path


def test_table1_bolds_the_higher_entry_per_pairing_and_column(table1_world):
    table, _ = build_table1(report_context(table1_world, "tiny"))
    assert table.header == ["Pairing", "Method", "ADD Avg@4", "SUB Avg@4", "MUL Avg@4", "Macro"]
    gropd, opd = row_of(table, T1, "GR-OPD"), row_of(table, T1, "vanilla")
    assert gropd[1].text == "GR-OPD (λ=0.25, γ=0.99)" and opd[1].text == "vanilla OPD"
    # macro: (50 + 30 + 20) / 3 = 33.33 vs (40 + 35 + 20) / 3 = 31.67; MUL 20 = 20 is a tie.
    assert [c.text for c in gropd[2:]] == ["50.00", "30.00", "20.00‡", "33.33"]
    assert [c.text for c in opd[2:]] == ["40.00", "35.00", "20.00‡", "31.67"]
    assert [c.bold for c in gropd[2:]] == [True, False, False, True]
    assert [c.bold for c in opd[2:]] == [False, True, False, False]
    md = to_markdown(table)
    assert "| I4nothink→I1.7nothink | GR-OPD (λ=0.25, γ=0.99) | **50.00** | 30.00 | 20.00‡ | **33.33** |" in md
    tex = to_latex(table)
    assert r"\toprule" in tex and r"\bottomrule" in tex and r"\textbf{50.00}" in tex


def test_table1_macro_is_the_mean_of_unrounded_suite_scores(table1_world):
    table, _ = build_table1(report_context(table1_world, "tiny"))
    scores = [1.004, 1.004, 1.012]
    assert f"{statistics.fmean(round(s, 2) for s in scores):.2f}" == "1.00"  # rounding first would give this
    macro = row_of(table, T2, "GR-OPD")[5]
    assert macro.text == "1.01"  # (1.004 + 1.004 + 1.012) / 3 = 1.00667
    assert float(macro.raw) == pytest.approx(3.02 / 3)


def test_table1_collapsed_row_and_missing_runs(table1_world):
    table, _ = build_table1(report_context(table1_world, "tiny"))
    assert [c.text for c in row_of(table, T2, "vanilla")[2:]] == ["Collapse"] * 4
    assert all(c.bold for c in row_of(table, T2, "GR-OPD")[2:])  # a finished run beats a collapse
    assert any(f"table1__{P2}__opd: collapsed at step 37: verifier reward" in note for note in table.notes)
    assert f"run table1__{P3}__gropd: running, step 40 of 120" in table.missing
    assert f"run table1__{P3}__opd: no eval/summary.json" in table.missing
    assert f"run table1__{P4}__gropd: trained, evaluation not finished" in table.missing
    assert f"run table1__{P4}__opd: not run" in table.missing
    assert [c.text for c in row_of(table, T3, "GR-OPD")[2:]] == ["—"] * 4
    md = to_markdown(table)
    assert "**Missing:**" in md and f"- run table1__{P4}__opd: not run" in md


def test_table1_seeds_give_mean_and_sample_std_and_mark_ties(tmp_path):
    write_experiments(tmp_path, table1_seeds=(0, 1, 2))
    res = tmp_path / "results"
    gropd = {"add": [50.0, 52.0, 54.0], "sub": [30.0, 34.0, 32.0], "mul": [10.0, 10.0, 10.0]}
    opd = {"add": [40.0, 41.0, 42.0], "sub": [31.0, 31.0, 31.5], "mul": [10.0, 10.0, 10.0]}
    for seed in range(3):
        tail = f"__seed{seed}" if seed else ""
        for method, scores in (("gropd", gropd), ("opd", opd)):
            write_run(
                res,
                "tiny",
                f"table1__{P1}__{method}{tail}",
                fields={"pairing": P1, "method": method, "seed": seed},
                eval_summary=summary({k: v[seed] for k, v in scores.items()}),
            )
    table, _ = build_table1(report_context(tmp_path, "tiny"))
    g, o = row_of(table, T1, "GR-OPD"), row_of(table, T1, "vanilla")
    # add: 52 ± 2 vs 41 ± 1 -> gap 11 > 2, bold. sub: 32 ± 2 vs 31.17 ± 0.29 -> gap 0.83 < 2, tie.
    assert g[2].text == "52.00 ± 2.00" and g[2].bold
    assert o[2].text == "41.00 ± 1.00" and not o[2].bold
    assert g[3].text == "32.00 ± 2.00‡" and not g[3].bold
    assert o[3].text == "31.17 ± 0.29‡" and not o[3].bold
    assert "mean ± sample std over seeds" in table.caption


def test_table1_paper_headers_show_used_and_paper_counts(tmp_path):
    write_experiments(tmp_path)
    scores = {k: 10.0 for k in ("aime24", "aime25", "amc23", "math500", "minerva", "olympiadbench")}
    questions = {"aime24": 30, "aime25": 30, "amc23": 40, "math500": 500, "minerva": 272, "olympiadbench": 675}
    write_run(
        tmp_path / "results",
        "paper",
        f"table1__{P1}__gropd",
        fields={"pairing": P1, "method": "gropd"},
        eval_summary=summary(scores, questions),
    )
    table, _ = build_table1(report_context(tmp_path, "paper"))
    assert table.header[2:] == [
        "AIME 2024 Avg@32",
        "AIME 2025 Avg@32",
        "AMC 2023 Avg@32",
        "MATH-500 Avg@8",
        "Minerva Math Avg@8",
        "OlympiadBench (675/170) Avg@8",
        "Macro",
    ]


@pytest.fixture
def lambda_world(tmp_path):
    write_experiments(tmp_path)
    for profile in ("tiny", "paper"):
        res = tmp_path / "results"
        write_run(
            res,
            profile,
            f"lambda__{P1}__gropd-lam0.5",
            fields={"pairing": P1, "method": "gropd", "lam": 0.5},
            metrics=[
                {"step": 1, "pressure_normalised": 3.0, "pressure_retained": 1.5},
                {"step": 2, "pressure_normalised": 3.5, "pressure_retained": 1.75},
                {"step": 3, "pressure_normalised": None, "pressure_retained": None},
                {"step": 4, "pressure_normalised": 4.0, "pressure_retained": 2.0},
            ],
        )
        write_run(
            res,
            profile,
            f"lambda__{P1}__gropd-lam0.25",
            "collapsed",
            collapse_step=2,
            fields={"pairing": P1, "method": "gropd", "lam": 0.25},
            metrics=[
                {"step": 1, "pressure_normalised": 2.0, "pressure_retained": 0.5},
                {"step": 2, "pressure_normalised": 3.0, "pressure_retained": 0.8},
            ],
        )
        write_run(res, profile, f"lambda__{P1}__opd", fields={"pairing": P1, "method": "opd"}, metrics=[])
    return tmp_path


def test_table2_averages_the_pressure_proxies_over_logged_steps(lambda_world):
    table, _ = build_table2(report_context(lambda_world, "tiny"))
    assert table.header == ["Pairing", "λ", "γ", "steps", "normalised pressure", "retained pressure"]
    rows = {(r[0].text, r[1].text): [c.text for c in r] for r in table.rows}
    # hand: (3 + 3.5 + 4) / 3 = 3.5 and (1.5 + 1.75 + 2) / 3 = 1.75 (the null step skipped)
    assert rows[(T1, "0.5")] == [T1, "0.5", "0.99", "1–4", "3.50", "1.75"]
    assert rows[(T1, "0.25")] == [T1, "0.25", "0.99", "1–2", "2.50", f"{(0.5 + 0.8) / 2:.2f}"]
    assert rows[(T2, "0.25")] == [T2, "0.25", "0.99", "—", "—", "—"]
    assert f"run lambda__{P2}__gropd-lam0.25: not run" in table.missing
    assert any("collapsed at step 2; averaged over steps 1–2" in note for note in table.notes)
    assert not any("__opd" in line for line in table.missing)  # vanilla OPD has no Table 2 row


def test_table2_paper_reference_column_only_in_paper_profile(lambda_world):
    paper, _ = build_table2(report_context(lambda_world, "paper"))
    assert paper.header[-2:] == ["paper (reference): normalised", "paper (reference): retained"]
    row = next(r for r in paper.rows if (r[0].text, r[1].text) == (T1, "0.5"))
    assert [c.text for c in row[-2:]] == ["3.21", "1.60"]
    assert [c.text for c in row[4:6]] == ["3.50", "1.75"]  # measured columns untouched
    tiny, _ = build_table2(report_context(lambda_world, "tiny"))
    assert not any("paper" in h for h in tiny.header)
    assert "3.21" not in to_markdown(tiny)


def test_table6_macro_tokens_and_reference_column(tmp_path):
    write_experiments(tmp_path)
    for profile in ("tiny", "paper"):
        write_run(
            tmp_path / "results",
            profile,
            "table6__B1.7-default",
            fields={"model": "B1.7", "mode": "default"},
            eval_summary=summary(
                {"add": 10.0, "sub": 20.0, "mul": 40.0}, tokens={"add": 1000.0, "sub": 2000.0, "mul": 4000.5}
            ),
        )
    tiny, _ = build_table6(report_context(tmp_path, "tiny"))
    assert tiny.header == ["model", "mode", "role", "Macro Avg@K", "mean tokens"]
    # macro (10 + 20 + 40) / 3 = 23.333; tokens (1000 + 2000 + 4000.5) / 3 = 2333.5
    assert [c.text for c in tiny.rows[0]] == ["tiny-B1.7", "default", "student", "23.333", "2,333.5"]
    assert [c.text for c in tiny.rows[1]] == ["tiny-I4", "think", "teacher", "—", "—"]
    assert "run table6__I4-think: not run" in tiny.missing
    paper, _ = build_table6(report_context(tmp_path, "paper"))
    assert paper.header[-2:] == ["paper (reference): Macro Avg@K", "paper (reference): mean tokens"]
    assert [c.text for c in paper.rows[0][-2:]] == ["23.099", "4,166.4"]
    assert [c.text for c in paper.rows[1][-2:]] == ["74.574", "10,138.4"]


def test_table3_shows_the_six_training_numbers(tmp_path):
    exp = write_experiments(tmp_path)
    profile_file = exp / "profiles" / "tiny.yaml"
    profile = yaml.safe_load(profile_file.read_text())
    profile["train"].update(
        prompts_per_batch=12, group_size=4, per_device_batch=24, grad_accum=1, replicas=1, minibatch_responses=16
    )
    profile_file.write_text(yaml.safe_dump(profile))
    paper = build_table3(report_context(tmp_path, "paper"))
    assert [r[1].text for r in paper.rows] == ["64", "8", "1", "8", "8", "64", "8"]
    tiny = build_table3(report_context(tmp_path, "tiny"))
    assert [r[1].text for r in tiny.rows] == ["12", "4", "24", "1", "1", "16", "3"]  # 12 x 4 / 16 = 3 steps
    assert [r[2].text for r in tiny.rows] == ["64", "8", "1", "8", "8", "64", "8"]


def test_table4_lists_repos_revisions_and_lock(tmp_path):
    exp = write_experiments(tmp_path)
    table = build_table4(report_context(tmp_path, "paper"))
    cells = [[c.text for c in row] for row in table.rows]
    assert [row[2:4] for row in cells] == [
        ["Qwen/Qwen3-1.7B-Base", "ea980cb"],
        ["Qwen/Qwen3-4B-Base", "906bfd4"],
        ["Qwen/Qwen3-1.7B", "70d244c"],
        ["Qwen/Qwen3-4B", "1cfa9a7"],
        ["Qwen/Qwen3-32B", "9216db5"],
    ]
    assert all(row[4] == UNPINNED for row in cells)
    full = "ea980cb" + "0123456789abcdef0123456789abcdef0"
    (exp / "lock.yaml").write_text(f"models:\n  Qwen/Qwen3-1.7B-Base: {{revision: {full}}}\n")
    cells = [[c.text for c in row] for row in build_table4(report_context(tmp_path, "paper")).rows]
    assert cells[0][4] == full and cells[1][4] == UNPINNED
    assert "full revision (lock.yaml)" not in build_table4(report_context(tmp_path, "tiny")).header


def test_table5_counts_and_total(tmp_path):
    write_experiments(tmp_path)
    table = build_table5(report_context(tmp_path, "paper"))
    assert [r[2].text for r in table.rows] == ["30", "30", "40", "500", "272", "170", "1,042"]
    assert [r[1].text for r in table.rows[:-1]] == ["32", "32", "32", "8", "8", "8"]
    assert len(table.missing) == 6  # no evaluation yet: counts used unknown
    write_run(
        tmp_path / "results",
        "tiny",
        "table6__B1.7-default",
        eval_summary=summary({"add": 1.0, "sub": 1.0, "mul": 1.0}, {"add": 50, "sub": 50, "mul": 500}),
    )
    tiny = build_table5(report_context(tmp_path, "tiny"))
    assert [[c.text for c in r] for r in tiny.rows] == [
        ["ADD", "4", "—", "50"],
        ["SUB", "4", "—", "50"],
        ["MUL", "4", "—", "500"],
        ["Total", "", "—", "600"],
    ]


@pytest.mark.skipif(not (REPO / "experiments" / "suites.yaml").exists(), reason="suites.yaml not written yet")
def test_tables_3_to_5_render_the_real_manifests(tmp_path):
    paths = build(
        ["table3", "table4", "table5"],
        profile="paper",
        results_root=tmp_path / "results",
        experiments_dir=REPO / "experiments",
        out_root=tmp_path / "out",
    )
    md = "".join(p.read_text() for p in paths if p.suffix == ".md")
    for text in ("| prompts per rollout batch | 64 |", "Qwen/Qwen3-32B", "9216db5", "| Total |  | 1,042 |"):
        assert text in md


def test_build_writes_every_artefact_with_provenance(table1_world):
    paths = build(
        ["table1", "table2", "table3", "table4", "table5", "table6"],
        profile="tiny",
        results_root=table1_world / "results",
        experiments_dir=table1_world / "experiments",
        out_root=table1_world / "out",
    )
    names = {p.name for p in paths}
    for name in ("table1", "table2", "table3", "table4", "table5", "table6"):
        assert {f"{name}.md", f"{name}.tex", f"{name}.csv", f"{name}.provenance.json"} <= names
    record = json.loads((table1_world / "out" / "tiny" / "table1.provenance.json").read_text())
    assert record["profile"] == "tiny" and record["built"]
    runs = {r["run_id"]: r for r in record["runs"]}
    assert runs[f"table1__{P1}__gropd"]["config_hash"] == f"hash-table1__{P1}__gropd"
    assert runs[f"table1__{P4}__opd"]["state"] == "not run"
    assert f"run table1__{P4}__opd: not run" in record["missing"]
    csv_text = (table1_world / "out" / "tiny" / "table1.csv").read_text()
    assert "Collapse" in csv_text and "33.333333333333336" in csv_text


def test_unknown_artefact_lists_the_valid_ones(tmp_path):
    with pytest.raises(ValueError, match="valid: " + ", ".join(ARTEFACTS)):
        build(["table7"], profile="tiny", experiments_dir=REPO / "experiments", out_root=tmp_path)
    with pytest.raises(ValueError, match="unknown profile"):
        build(["table3"], profile="huge", experiments_dir=REPO / "experiments", out_root=tmp_path)


def test_report_yaml_rejects_unknown_keys(tmp_path):
    exp = write_experiments(tmp_path, report={"fig3": {"metric": "verifier_reward", "windw": 10}})
    with pytest.raises(ConfigError, match=r"report.yaml: fig3.windw"):
        load_settings(exp / "report.yaml")

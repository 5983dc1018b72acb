"""Tables 1–6 rebuilt from results fixtures: the statistics convention (mean ± sample std with n, bold only
where the paired comparison calls it, nothing bold at n = 1), CSV numbers in their own columns, the Avg@K
header from the K the runs recorded, Missing lines equal to the provenance sidecar, the rows beyond the paper,
the pressure medians pooled with Table 1's runs. Every expected number is worked out by hand in a comment.
"""

from __future__ import annotations

import csv
import io
import json

import pytest
import yaml
from report_fixtures import (
    P1,
    P2,
    P3,
    PAPER_SUITES,
    STEPS,
    dump,
    macro_summary,
    metric_rows,
    scored,
    seeded,
    summary,
    table1_grid,
    write_experiments,
    write_run,
)

from gropd.config import ConfigError
from gropd.report import ARTEFACTS, build
from gropd.report.settings import load_settings

T1, T3 = "I4nothink→I1.7nothink", "I4think→B1.7"
BASELINES = {
    "kind": "train",
    "seeds": [0],
    "matrix": {"pairing": [P1], "method": ["fullkl", "constant"]},
    "set": [{"when": {"method": "constant"}, "values": {"constant": {"c": 0.5}}}],  # the registered c
}


def built(root, *names, profile="tiny"):
    """Build `names` from root/results into root/out; returns {file name: text} of the text files."""
    paths = build(
        list(names),
        profile=profile,
        results_root=root / "results",
        experiments_dir=root / "experiments",
        out_root=root / "out",
    )
    return {p.name: p.read_text() for p in paths if p.suffix in (".md", ".csv", ".tex", ".json")}


def row(md: str, *labels: str) -> list[str]:
    """The cells of the Markdown row whose first cells are `labels`."""
    for line in md.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[: len(labels)] == list(labels):
            return cells
    raise AssertionError(f"no row {labels} in\n{md}")


def csv_rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


@pytest.fixture
def table1_world(tmp_path):
    """P1: GR-OPD macros 30, 32, 34 and OPD 20, 21, 22 (seeds 0–2; the grid lists seed 0, the others are on disk
    as `--seeds 3` leaves them); P3: GR-OPD 5, 6 and OPD collapsed in both seeds."""
    write_experiments(tmp_path, grids={"table1": table1_grid(P1, P3)})
    scored(tmp_path, f"table1__{P1}__gropd", [30.0, 32.0, 34.0])
    scored(tmp_path, f"table1__{P1}__opd", [20.0, 21.0, 22.0])
    scored(tmp_path, f"table1__{P3}__gropd", [5.0, 6.0])
    scored(tmp_path, f"table1__{P3}__opd", [None, None])
    return tmp_path


def test_table1_cells_are_mean_std_n_and_bold_follows_the_paired_comparison(table1_world):
    md = built(table1_world, "table1")["table1.md"]
    # GR-OPD: add = macro − 1 = 29, 31, 33: mean 31, sample std 2. Paired GR-OPD − OPD per seed: 10, 11, 12: mean
    # 11, std 1, t(0.975, 2) = 4.3027 -> half-width 4.3027 / √3 = 2.484: [+8.52, +13.48], excluding 0: bold.
    assert row(md, T1, "GR-OPD (λ=0.25, γ=0.99)") == [
        T1,
        "GR-OPD (λ=0.25, γ=0.99)",
        "3",
        "**31.00 ± 2.00**",
        "**32.00 ± 2.00**",
        "**33.00 ± 2.00**",
        "**32.00 ± 2.00**",
        "+11.00 [+8.52, +13.48] (n=3), better",
    ]
    assert row(md, T1, "vanilla OPD")[2:] == ["3", "20.00 ± 1.00", "21.00 ± 1.00", "22.00 ± 1.00", "21.00 ± 1.00", "—"]
    # P3: vanilla OPD collapsed in both seeds: no mean, no comparison; GR-OPD 5, 6: mean 5.5, std 0.707.
    assert row(md, T3, "vanilla OPD")[2:] == ["2 collapsed"] + ["Collapse"] * 4 + ["—"]
    assert row(md, T3, "GR-OPD (λ=0, γ=0.99)")[6:] == ["5.50 ± 0.71", "collapsed: vanilla OPD 2 of 2, this row 0 of 2"]
    assert "mean ± sample std (ddof 1) over n seeds" in md and "`" + str(table1_world / "results" / "tiny") in md


def test_table1_csv_carries_numbers_in_their_own_columns(table1_world):
    rows = csv_rows(built(table1_world, "table1")["table1.csv"])
    gropd = next(r for r in rows if r["Pairing"] == T1 and r["Method"].startswith("GR-OPD"))
    assert (float(gropd["Macro mean"]), float(gropd["Macro std"]), int(gropd["Macro n"])) == (32.0, 2.0, 3)
    assert (int(gropd["seeds n"]), int(gropd["seeds collapsed"])) == (3, 0)
    assert float(gropd["Δ Macro vs vanilla OPD mean"]) == pytest.approx(11.0)
    assert float(gropd["Δ Macro vs vanilla OPD ci_low"]) == pytest.approx(11 - 4.302652729749464 / 3**0.5)
    collapsed = next(r for r in rows if r["Pairing"] == T3 and r["Method"] == "vanilla OPD")
    assert collapsed["Macro mean"] == "" and collapsed["seeds collapsed"] == "2"


def test_one_seed_bolds_nothing(tmp_path):
    write_experiments(tmp_path, grids={"table1": table1_grid(P1)})
    scored(tmp_path, f"table1__{P1}__gropd", [42.79])
    scored(tmp_path, f"table1__{P1}__opd", [12.0])
    md = built(tmp_path, "table1")["table1.md"]
    assert "**" not in md.split("|---")[1]
    assert row(md, T1, "GR-OPD (λ=0.25, γ=0.99)")[2:] == ["1", "41.79", "42.79", "43.79", "42.79", "+30.79 (n=1)"]


def test_the_avg_header_follows_the_k_the_runs_recorded(tmp_path):
    """suites.yaml says K = 4; the runs of P1 were given 8 (eval.k) and recorded it (one run of P2 recorded 4 for
    every suite). A run that recorded another K than it was given is a broken record (test_results_integrity)."""
    write_experiments(tmp_path, grids={"table1": table1_grid(P1, P2)})
    eight = {"eval": {"k": {"add": 8, "sub": 8, "mul": 8}}}
    for method in ("gropd", "opd"):
        path = f"table1__{P1}__{method}"
        write_run(tmp_path / "results", "tiny", path, eval_summary=macro_summary(30.0, k=8), config=eight)
    md = built(tmp_path, "table1")["table1.md"]
    assert "| ADD Avg@8 | SUB Avg@8 | MUL Avg@8 | Macro |" in md
    write_run(tmp_path / "results", "tiny", f"table1__{P2}__opd", eval_summary=macro_summary(30.0, k=4))
    assert "| ADD Avg@4,8 |" in built(tmp_path, "table1")["table1.md"]


def test_missing_lines_name_each_run_once_and_equal_the_provenance(table1_world):
    results = table1_world / "results" / "tiny"
    write_run(table1_world / "results", "tiny", seeded(f"table1__{P1}__opd", 3))  # finished, no summary
    write_run(
        table1_world / "results", "tiny", seeded(f"table1__{P1}__gropd", 3), eval_summary={"suites": {}}
    )  # no suites
    files = built(table1_world, "table1")
    md, provenance = files["table1.md"], json.loads(files["table1.provenance.json"])
    listed = [line[2:] for line in md.split("**Missing** (runs not in the numbers above):\n")[1].splitlines()]
    summary_path = results / f"table1__{P1}__opd__seed3" / "eval" / "summary.json"
    no_suites = results / f"table1__{P1}__gropd__seed3" / "eval" / "summary.json"
    assert (
        listed
        == provenance["missing"]
        == [
            f"`table1__{P1}__gropd__seed3`: {no_suites} has no suites",
            f"`table1__{P1}__opd__seed3`: finished, but {summary_path} is missing",
            f"`table1__{P3}__opd`: collapsed at step 5",
            f"`table1__{P3}__opd__seed1`: collapsed at step 5",
        ]
    )
    assert row(md, T1, "vanilla OPD")[2] == "3"  # the seed without a summary is not in n
    assert {r["run_id"] for r in provenance["runs"]} >= {f"table1__{P1}__opd__seed3", f"table1__{P3}__opd"}
    assert provenance["results_root"] == str(table1_world / "results")


def test_rows_beyond_the_paper_compare_by_paired_seeds_with_both_paper_methods(table1_world):
    """Grid baselines: full-vocabulary KL 25, 26, 27; constant advantage (c = 0.5) 20, 22, 24 on P1."""
    dump(table1_world / "experiments" / "grids" / "baselines.yaml", {"name": "baselines", **BASELINES})
    scored(table1_world, f"baselines__{P1}__fullkl", [25.0, 26.0, 27.0])
    scored(table1_world, f"baselines__{P1}__constant", [20.0, 22.0, 24.0], config={"constant": {"c": 0.5}})
    md = built(table1_world, "table1")["table1.md"]
    assert "| Macro | Δ Macro vs vanilla OPD | Δ Macro vs GR-OPD |" in md
    # fullkl − OPD: 5, 5, 5 (std 0: the interval is the point); fullkl − GR-OPD: −5, −5, −7... by seed: 25 − 30,
    # 26 − 32, 27 − 34 = −5, −6, −7: mean −6, std 1, half-width 2.484.
    assert row(md, T1, "full-vocabulary KL, beyond the paper")[6:] == [
        "26.00 ± 1.00",
        "+5.00 [+5.00, +5.00] (n=3), better",
        "-6.00 [-8.48, -3.52] (n=3), worse",
    ]
    # constant − OPD: 0, 1, 2: mean 1, std 1: [−1.48, +3.48] holds 0.
    assert row(md, T1, "constant advantage, beyond the paper (c=0.5)")[7] == "+1.00 [-1.48, +3.48] (n=3), not resolved"
    assert "**" not in "".join(row(md, T1, "full-vocabulary KL, beyond the paper"))  # bold: the paper's pair only
    assert "beyond the paper" in md.split("|")[0] and "grids table1 and baselines" in md


def test_table2_is_the_median_per_run_pooled_over_every_grid(tmp_path):
    """λ-sweep P1 λ = .25 seed 0: normalised 1 ×4, 2 ×2, 100 ×4 (median 2, mean 40.6); Table 1's twin of it (a copy)
    and Table 1's seed 1: 3 ×4, 4 ×2, 5 ×4 (median 4). Pooled: seeds 0, 1: mean 3, sample std √2."""
    write_experiments(tmp_path)
    normalised = {0: [1.0] * 4 + [2.0] * 2 + [100.0] * 4, 1: [3.0] * 4 + [4.0] * 2 + [5.0] * 4}
    rows = {
        s: metric_rows(STEPS, pressure_normalised=v, pressure_retained=[x / 4 for x in v])
        for s, v in normalised.items()
    }
    lam_run = f"lambda__{P1}__gropd-lam0.25"
    write_run(tmp_path / "results", "tiny", lam_run, metrics=rows[0])
    write_run(tmp_path / "results", "tiny", f"table1__{P1}__gropd", metrics=rows[0], fields={"copied_from": lam_run})
    write_run(tmp_path / "results", "tiny", f"table1__{P1}__gropd__seed1", metrics=rows[1])
    write_run(tmp_path / "results", "tiny", f"lambda__{P1}__gropd-lam0.5", "running", step=2, metrics=rows[1][:2])
    files = built(tmp_path, "table2")
    md = files["table2.md"]
    assert row(md, T1, "0.25", "0.99")[:6] == [T1, "0.25", "0.99", "2", "3.00 ± 1.41", "0.75 ± 0.35"]
    assert row(md, T1, "0.5", "0.99")[3:6] == ["0", "—", "—"]
    assert f"`{lam_run.replace('0.25', '0.5')}`: running, step 2 of {STEPS}" in md
    assert "median" in md and "paper (reference)" not in md
    missing = json.loads(files["table2.provenance.json"])["missing"]  # each once; finished without an evaluation
    assert [line.split(":")[0] for line in missing] == [
        f"`{lam_run.replace('0.25', '0.5')}`",
        f"`{lam_run}`",
        f"`table1__{P1}__gropd__seed1`",
        f"`lambda__{P2}__gropd-lam0.25`",
    ]
    assert missing[0].endswith(f"running, step 2 of {STEPS}") and missing[-1].endswith("not run")
    assert all(line.endswith("eval/summary.json is missing") for line in missing[1:3])


def test_table2_pairs_each_lambdas_macro_with_vanilla_opd_and_table1s_gropd(tmp_path):
    """P1, Macro per seed 0-2: λ = .5: 43, 46, 43 (mean 44, std √3 = 1.73); Table 1's GR-OPD (λ = .25): 40, 42, 41
    (41 ± 1); vanilla OPD 41 ×3. Paired, t(.975, 2) = 4.303: λ = .5 − OPD 2, 5, 2: mean 3, se 1 → [−1.30, +7.30];
    λ = .5 − λ = .25: 3, 4, 2: mean 3, se 1/√3 → ±2.48: [+0.52, +5.48], better; λ = .25 − OPD: −1, 1, 0 → [−2.48,
    +2.48]; λ = .25 is Table 1's own setting: —."""
    write_experiments(tmp_path, table1_seeds=(0, 1, 2))
    pressure = {"metrics": metric_rows(STEPS, pressure_normalised=[1.0] * STEPS, pressure_retained=[0.5] * STEPS)}
    scored(tmp_path, f"lambda__{P1}__gropd-lam0.5", [43.0, 46.0, 43.0], **pressure)
    scored(tmp_path, f"table1__{P1}__gropd", [40.0, 42.0, 41.0], **pressure)
    scored(tmp_path, f"lambda__{P1}__opd", [41.0, 41.0, 41.0], **pressure)
    md = built(tmp_path, "table2")["table2.md"]
    assert "Δ Macro vs vanilla OPD | Δ Macro vs Table 1's GR-OPD" in md
    assert row(md, T1, "0.5", "0.99")[6:] == [
        "44.00 ± 1.73",
        "+3.00 [-1.30, +7.30] (n=3), not resolved",
        "+3.00 [+0.52, +5.48] (n=3), better",
    ]
    assert row(md, T1, "0.25", "0.99")[6:] == ["41.00 ± 1.00", "+0.00 [-2.48, +2.48] (n=3), not resolved", "—"]


def test_table2_and_table6_show_the_papers_values_on_the_paper_profile(tmp_path):
    write_experiments(tmp_path)
    steps = 200  # the paper profile's (a finished run ran every step): medians 4 and 2
    rows = metric_rows(steps, pressure_normalised=[3.0, 5.0] * 100, pressure_retained=[1.5, 2.5] * 100)
    write_run(tmp_path / "results", "paper", f"lambda__{P1}__gropd-lam0.5", metrics=rows)
    scores = {suite: 10.0 for suite in ("aime24", "aime25", "amc23", "math500", "minerva", "olympiadbench")}
    paper_k = {suite: k for suite, (_, k, _) in PAPER_SUITES.items()}
    write_run(tmp_path / "results", "paper", "table6__B1.7-default", eval_summary=summary(scores, k=paper_k))
    files = built(tmp_path, "table2", "table6", profile="paper")
    assert row(files["table2.md"], T1, "0.5", "0.99")[3:] == ["1", "4.00", "2.00", "—", "—", "—", "3.21", "1.60"]
    assert row(files["table6.md"], "Qwen3-1.7B-Base")[3:] == ["1", "10.00", "100.0", "23.099", "4,166.4"]


def test_table6_macro_tokens_and_seeds(tmp_path):
    write_experiments(tmp_path)
    for seed, value in ((0, 40.0), (1, 44.0)):
        tokens = {"add": 10.0, "sub": 20.0, "mul": 60.0 + seed}
        write_run(
            tmp_path / "results",
            "tiny",
            seeded("table6__B1.7-default", seed),
            eval_summary=summary({"add": value, "sub": value, "mul": value}, tokens=tokens),
        )
    md = built(tmp_path, "table6")["table6.md"]
    # Macro 40 and 44: mean 42, std 2.83; tokens (10 + 20 + 60) / 3 = 30 and 30.33: mean 30.17, std 0.24.
    assert row(md, "tiny-B1.7") == ["tiny-B1.7", "default", "student", "2", "42.00 ± 2.83", "30.2 ± 0.2"]
    assert row(md, "tiny-I4", "think")[3:] == ["0", "—", "—"]
    assert "| evaluation seeds |" in md and "over n evaluation seeds" in md and "paired comparison" not in md


def test_table3_resolves_each_profile_with_its_pairings(tmp_path):
    """P2's pairing layer doubles the tiny prompts per batch: Table 3 shows both values the runs get."""
    write_experiments(tmp_path)
    pairings = yaml.safe_load((tmp_path / "experiments" / "pairings.yaml").read_text())
    pairings[P2]["config"] = {**pairings[P2].get("config", {}), "tiny": {"train": {"prompts_per_batch": 32}}}
    dump(tmp_path / "experiments" / "pairings.yaml", pairings)
    md = built(tmp_path, "table3")["table3.md"]
    assert row(md, "prompts per rollout batch") == ["prompts per rollout batch", "16, 32", "64"]
    assert row(md, "optimiser steps per rollout batch") == ["optimiser steps per rollout batch", "2, 4", "8"]
    assert "| quantity | tiny profile | paper profile |" in md


def test_table4_takes_full_revisions_from_the_lock(tmp_path):
    write_experiments(tmp_path)
    models = yaml.safe_load((tmp_path / "experiments" / "models.yaml").read_text())["paper"]
    repo, short = models["B1.7"]["source"]["repo"], models["B1.7"]["source"]["revision"]
    full = short + "0" * (40 - len(short))
    dump(tmp_path / "experiments" / "lock.yaml", {"models": {repo: {"short": short, "full": full}}, "datasets": {}})
    md = built(tmp_path, "table4", profile="paper")["table4.md"]
    assert row(md, "B1.7")[-1] == full
    assert row(md, "B4")[-1] == "unpinned: run ./reproduce.sh pin"
    assert "full revision (lock.yaml)" not in built(tmp_path, "table4")["table4.md"]


def test_table5_k_and_questions_recorded(tmp_path):
    write_experiments(tmp_path)
    eight = {"eval": {"k": {"add": 8, "sub": 8, "mul": 8}}}  # (a K or a count the config did not give: broken)
    write_run(tmp_path / "results", "tiny", "table6__B1.7-default", eval_summary=macro_summary(30.0, k=8), config=eight)
    questions = {"add": 20, "sub": 20, "mul": 20}
    write_run(
        tmp_path / "results",
        "tiny",
        f"table1__{P1}__opd",
        eval_summary=summary({"add": 1.0, "sub": 1.0, "mul": 1.0}, questions=questions),
        config={"eval": {"questions": 20}},
    )
    md = built(tmp_path, "table5")["table5.md"]
    assert row(md, "ADD") == ["ADD", "4", "4, 8", "—", "20, 300"]
    assert row(md, "Total") == ["Total", "", "", "—", "900"]  # the largest count of each suite: 3 × 300


def test_tables_3_to_5_render_the_real_manifests(tmp_path):
    from report_fixtures import REPO

    for profile in ("paper", "tiny"):
        paths = build(
            ["table3", "table4", "table5"],
            profile=profile,
            results_root=tmp_path / "results",
            experiments_dir=REPO / "experiments",
            out_root=tmp_path / "out",
        )
        assert {p.name for p in paths} >= {"table3.md", "table4.tex", "table5.csv"}
    assert "| MATH-500 | 8 | — | 500 | — |" in (tmp_path / "out" / "paper" / "table5.md").read_text()


def test_unknown_names_and_bad_report_yaml_are_refused(tmp_path):
    write_experiments(tmp_path, report={"decimalz": 2})
    with pytest.raises(ConfigError, match="decimalz"):
        load_settings(tmp_path / "experiments" / "report.yaml")
    with pytest.raises(ConfigError, match="unknown artefact tableX .*one of " + ", ".join(ARTEFACTS)):
        build(["tableX"], profile="tiny", results_root=tmp_path, experiments_dir=tmp_path, out_root=tmp_path)

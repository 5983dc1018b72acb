"""Figures 3 and 4 rebuilt from results fixtures written here: panels, lines, styles, colours, scales."""

from __future__ import annotations

import statistics

import pytest
from matplotlib.colors import to_rgba
from report_fixtures import P1, P2, report_context, write_experiments, write_run

from gropd.report import build
from gropd.report.figure3 import build_figure3
from gropd.report.figure4 import build_figure4
from gropd.report.plotting import centred_mean, trailing_mean

PURPLE = to_rgba("purple")


def rows(n, **metrics):
    """n rollout batches (steps 1..n); each metric given as a function of the step."""
    return [{"step": s, **{k: f(s) for k, f in metrics.items()}} for s in range(1, n + 1)]


def reward(s):
    return 0.5 + 0.01 * s


def grouped(lines):
    """Drawn runs as (faint, bold, dot) triples, in drawing order."""
    assert len(lines) % 3 == 0
    return [tuple(lines[i : i + 3]) for i in range(0, len(lines), 3)]


@pytest.fixture
def world(tmp_path):
    write_experiments(tmp_path)
    res = tmp_path / "results"
    write_run(
        res,
        "tiny",
        f"lambda__{P1}__gropd-lam0.5",
        metrics=rows(30, verifier_reward=reward),
        fields={"pairing": P1, "method": "gropd", "lam": 0.5, "gamma": 0.99},
    )
    write_run(
        res,
        "tiny",
        f"lambda__{P1}__gropd-lam0.25",
        "collapsed",
        collapse_step=12,
        metrics=rows(12, verifier_reward=reward),
        fields={"pairing": P1, "method": "gropd", "lam": 0.25},
    )
    write_run(
        res,
        "tiny",
        f"lambda__{P1}__opd",
        metrics=rows(30, verifier_reward=lambda s: 0.4),
        fields={"pairing": P1, "method": "opd"},
    )
    write_run(
        res,
        "tiny",
        f"lambda__{P2}__gropd-lam0.25",
        "running",
        step=10,
        steps=120,
        metrics=rows(10, verifier_reward=reward),
        fields={"pairing": P2, "method": "gropd", "lam": 0.25},
    )
    for lam in (0.2, 0.25):
        for gamma in (0.99, 1.0):

            def length(s, gamma=gamma):
                return 100.0 * (1.05**s if gamma == 1.0 else 1.0)

            metrics = rows(
                20,
                mean_response_len=length,
                verifier_reward=reward,
                pearson_score_len=lambda s: None if s % 2 else 0.3,
                spearman_score_reward=lambda s, lam=lam: None if lam == 0.2 else 0.1,
            )
            write_run(
                res,
                "tiny",
                f"gamma__{P2}__gropd-lam{lam:g}-gamma{gamma:g}",
                metrics=metrics,
                fields={"pairing": P2, "method": "gropd", "lam": lam, "gamma": gamma},
            )
    return tmp_path


def test_fig3a_panels_lines_colours_and_last_step_dots(world):
    figures = build_figure3(report_context(world))
    fig = figures.figures["fig3a"]
    left, right = fig.axes
    assert left.get_title() == "I4nothink→I1.7nothink" and right.get_title() == "I32nothink→I1.7nothink"
    assert left.get_ylabel() == "verifier_reward"
    runs = grouped(left.get_lines())
    assert len(runs) == 3 and len(grouped(right.get_lines())) == 1
    (faint, bold, dot), (_, bold25, dot25), (_, opd_bold, opd_dot) = runs
    assert faint.get_alpha() < 1 and bold.get_linewidth() > faint.get_linewidth()
    assert list(bold.get_ydata()) == pytest.approx(trailing_mean([reward(s) for s in range(1, 31)], 10))
    assert bold.get_ydata()[-1] == pytest.approx(statistics.fmean(reward(s) for s in range(21, 31)))
    assert dot.get_marker() == "o" and dot.get_linestyle() == "None" and list(dot.get_xdata()) == [30]
    assert list(dot25.get_xdata()) == [12]  # the collapsed run ends early
    assert to_rgba(opd_bold.get_color()) == PURPLE and to_rgba(opd_dot.get_color()) == PURPLE
    assert to_rgba(bold.get_color()) != PURPLE and bold.get_color() != bold25.get_color()
    assert all(line.get_linestyle() == "-" for line in (faint, bold, opd_bold))
    assert [t.get_text() for t in left.get_legend().get_texts()] == [
        "GR-OPD (λ=0.5, γ=0.99)",
        "GR-OPD (λ=0.25, γ=0.99)",
        "vanilla OPD",
    ]
    assert f"run lambda__{P2}__opd: not run" in figures.missing
    assert f"run lambda__{P2}__gropd-lam0.25: running, step 10 of 120 (partial line)" in figures.missing


def test_fig3b_dashes_gamma_one(world):
    fig = build_figure3(report_context(world)).figures["fig3b"]
    (ax,) = fig.axes
    styles = [(bold.get_label(), bold.get_linestyle()) for _, bold, _ in grouped(ax.get_lines())]
    assert styles == [
        ("GR-OPD (λ=0.2, γ=0.99)", "-"),
        ("GR-OPD (λ=0.2, γ=1)", "--"),
        ("GR-OPD (λ=0.25, γ=0.99)", "-"),
        ("GR-OPD (λ=0.25, γ=1)", "--"),
    ]


def test_fig3_metric_comes_from_report_yaml(tmp_path):
    write_experiments(tmp_path, report={"fig3": {"metric": "mean_response_len", "window": 3}})
    write_run(
        tmp_path / "results",
        "tiny",
        f"lambda__{P1}__opd",
        fields={"pairing": P1, "method": "opd"},
        metrics=rows(5, mean_response_len=lambda s: float(s)),
    )
    figures = build_figure3(report_context(tmp_path))
    ax = figures.figures["fig3a"].axes[0]
    assert ax.get_ylabel() == "mean_response_len"
    assert list(ax.get_lines()[1].get_ydata()) == pytest.approx([1, 1.5, 2, 3, 4])  # trailing 3-step mean


def test_fig4_panels_scales_styles_and_null_metrics(world):
    figures = build_figure4(report_context(world))
    a, b, c, d = figures.figures["fig4"].axes
    assert [ax.get_yscale() for ax in (a, b, c, d)] == ["log", "linear", "linear", "linear"]
    assert a.get_title().startswith("(A)") and d.get_title().startswith("(D)")
    assert [len(ax.get_lines()) for ax in (a, b, c, d)] == [4, 4, 4, 2]  # λ = .2 runs have no Spearman values
    assert [line.get_linestyle() for line in a.get_lines()] == ["-", "--", "-", "--"]
    assert list(c.get_lines()[0].get_xdata()) == list(range(2, 21, 2))  # null Pearson steps skipped
    lengths = [100.0 * 1.05**s for s in range(1, 21)]
    assert list(a.get_lines()[1].get_ydata()) == pytest.approx(centred_mean(lengths, 10))
    assert a.get_lines()[1].get_ydata()[0] == pytest.approx(statistics.fmean(lengths[:6]))  # v_1..v_6 (window 10)
    assert "centred 10-step moving averages" in figures.figures["fig4"].get_suptitle()
    assert (
        f"run gamma__{P2}__gropd-lam0.2-gamma0.99: no spearman_score_reward values in metrics.jsonl" in figures.missing
    )


def test_build_writes_png_pdf_markdown_and_provenance(world):
    paths = build(
        ["fig3", "fig4"],
        profile="tiny",
        results_root=world / "results",
        experiments_dir=world / "experiments",
        out_root=world / "out",
    )
    names = {p.name for p in paths}
    assert {
        "fig3a.png",
        "fig3a.pdf",
        "fig3b.png",
        "fig3b.pdf",
        "fig3.md",
        "fig3.provenance.json",
        "fig4.png",
        "fig4.pdf",
        "fig4.md",
        "fig4.provenance.json",
    } == names
    assert all(p.stat().st_size > 0 for p in paths)
    assert (world / "out" / "tiny" / "fig3a.png").read_bytes()[:4] == b"\x89PNG"
    assert f"- run lambda__{P2}__opd: not run" in (world / "out" / "tiny" / "fig3.md").read_text()


def test_empty_results_still_draw(tmp_path):
    write_experiments(tmp_path)
    figures = build_figure3(report_context(tmp_path))
    assert len(figures.missing) == 5 + 4 and all(line.endswith("not run") for line in figures.missing)
    assert all(len(ax.get_lines()) == 0 for ax in figures.figures["fig3a"].axes)
    assert build_figure4(report_context(tmp_path)).figures["fig4"].axes[0].get_yscale() == "log"

"""Figures 1(b–d), 3 and 4 rebuilt from results fixtures: lines, colours and styles, readable axes (no metric
keys, no "×10" log ticks), the seeds each figure draws, J_H by hand and its peak from the full curve."""

from __future__ import annotations

import json
import statistics

import pytest
import torch
from matplotlib.colors import to_rgba
from report_fixtures import P1, P2, P3, evidence, metric_rows, seeded, write_experiments, write_run

from gropd.horizon import separation_curve
from gropd.report import build, figures
from gropd.report.figures import moving_mean

PURPLE = to_rgba("purple")
FIG1 = {
    "kind": "train",
    "seeds": [0],
    "include": [
        {"kind": "score", "pairing": P1},
        {"kind": "score", "pairing": P2},
        {"kind": "score", "pairing": P3},
        {"pairing": P1, "method": "raw"},
        {"pairing": P1, "method": "gropd", "gropd.lam": 0.25},
    ],
}
# J_H by hand. Batch 1, prompt A: correct [1,1,1,0,0,0,0,0] vs incorrect [0,0,0,1,1,1,1,1] (8 tokens each):
# S_c = min(H, 3), S_w = max(0, H − 3): wins for H ≤ 5, tie at 6, losses at 7, 8.
# Batch 2, prompt B: correct [1, 0] (2 tokens) vs incorrect [0, 0, 0, 3] (4 tokens): S_c = 1, S_w = 0 until
# H = 4, then 3: wins for H ≤ 3, losses after. Prompt C: both correct, left out.
J_EXPECTED = [(a + b) / 2 for a, b in zip([1, 1, 1, 1, 1, 0.5, 0, 0], [1, 1, 1, 0, 0, 0, 0, 0], strict=True)]


def saved_batch(rows, group_size, width=8):
    """A dumped rollout batch from (f values, correct) rows, right-padded to `width`."""
    f, mask = torch.zeros(len(rows), width), torch.zeros(len(rows), width)
    for i, (values, _) in enumerate(rows):
        f[i, : len(values)] = torch.tensor(values, dtype=torch.float32)
        mask[i, : len(values)] = 1
    return {"f": f, "mask": mask, "correct": torch.tensor([c for _, c in rows]), "group_size": group_size}


def reward(s):
    return 0.5 + 0.01 * s


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("world")
    write_experiments(tmp_path, grids={"fig1": FIG1, "table6": None}, steps=30)  # every finished run: 30 steps
    res = tmp_path / "results"
    batches = [
        saved_batch([([1, 1, 1, 0, 0, 0, 0, 0], True), ([0, 0, 0, 1, 1, 1, 1, 1], False)], 2),
        saved_batch([([1, 0], True), ([0, 0, 0, 3], False), ([2], True), ([5, 5], True)], 2, width=4),
    ]
    write_run(res, "tiny", f"fig1__{P1}__score", horizon=separation_curve(batches))
    write_run(res, "tiny", f"fig1__{P2}__score")  # a pass without horizon.json
    write_run(res, "tiny", f"fig1__{P3}__score", horizon=separation_curve([saved_batch([([1, 0], False)] * 2, 2)]))
    length, falling = (lambda s: 20.0 + 15 * s), (lambda s: 0.6 - 0.05 * s)
    write_run(
        res, "tiny", f"fig1__{P1}__raw", metrics=metric_rows(30, mean_response_len=length, verifier_reward=falling)
    )
    write_run(
        res,
        "tiny",
        f"fig1__{P1}__gropd-lam0.25",
        "running",
        step=5,
        steps=12,
        metrics=metric_rows(5, mean_response_len=30.0, verifier_reward=0.5),
    )
    write_run(res, "tiny", f"lambda__{P1}__gropd-lam0.5", metrics=metric_rows(30, verifier_reward=reward))
    lam25 = metric_rows(12, verifier_reward=reward)
    write_run(res, "tiny", f"lambda__{P1}__gropd-lam0.25", "collapsed", collapse_step=12, metrics=lam25)
    write_run(res, "tiny", f"lambda__{P1}__opd", metrics=metric_rows(30, verifier_reward=0.4))
    write_run(
        res, "tiny", f"lambda__{P2}__gropd-lam0.25", "running", step=10, metrics=metric_rows(10, verifier_reward=reward)
    )
    for lam in (0.2, 0.25):
        for gamma in (0.99, 1.0):
            rows = metric_rows(
                30,
                mean_response_len=lambda s, gamma=gamma: 47.0 + (0.25 * s if gamma == 1.0 else 0.0),
                verifier_reward=reward,
                pearson_score_len=lambda s: None if s % 2 else 0.3,
                spearman_score_reward=lambda s, lam=lam: None if lam == 0.2 else 0.1,
            )
            write_run(res, "tiny", f"gamma__{P2}__gropd-lam{lam:g}-gamma{gamma:g}", metrics=rows)
    return tmp_path


@pytest.fixture
def drawn(monkeypatch):
    """The Figures and notes each figure artefact is made of, as figures.figure_artefact receives them (not
    rendered: the build test renders)."""
    seen = {}

    def spy(ev, name, text, figs, runs, notes):
        seen[name] = {"figures": figs, "notes": notes, "caption": text[1], "points": text[2]}

    monkeypatch.setattr(figures, "figure_artefact", spy)
    return seen


def triples(lines):
    """A trailing-average run's lines: (faint, dot, bold) per run, in drawing order."""
    assert len(lines) % 3 == 0
    return [tuple(lines[i : i + 3]) for i in range(0, len(lines), 3)]


def test_fig3a_lines_colours_readable_axes_and_seeds(world, drawn):
    figures.fig3(evidence(world))
    fig = drawn["fig3"]["figures"]["fig3a"]
    left, right = fig.axes
    assert (left.get_title(), right.get_title()) == ("I4nothink→I1.7nothink", "I32nothink→I1.7nothink")
    assert left.get_ylabel() == "mean verifier reward (fraction correct)"
    assert left.get_xlabel() == "rollout batch (training step)"
    assert "seed 0" in fig.get_suptitle()
    (faint, dot, bold), (_, dot25, bold25), (_, opd_dot, opd_bold) = triples(left.get_lines())
    assert faint.get_alpha() < 1 and bold.get_linewidth() > faint.get_linewidth()
    assert list(bold.get_ydata()) == pytest.approx(moving_mean([reward(s) for s in range(1, 31)], 10, False))
    assert bold.get_ydata()[-1] == pytest.approx(statistics.fmean(reward(s) for s in range(21, 31)))
    assert dot.get_marker() == "o" and list(dot.get_xdata()) == [30] and list(dot25.get_xdata()) == [12]
    assert to_rgba(opd_bold.get_color()) == PURPLE == to_rgba(opd_dot.get_color())
    assert to_rgba(bold.get_color()) != PURPLE and bold.get_color() != bold25.get_color()
    assert [t.get_text() for t in left.get_legend().get_texts()] == [
        "GR-OPD (λ=0.5, γ=0.99)",
        "GR-OPD (λ=0.25, γ=0.99)",
        "vanilla OPD",
    ]
    assert drawn["fig3"]["notes"] == [
        f"`lambda__{P2}__gropd-lam0.25`: running, step 10 of 30 (partial line)",
        f"`lambda__{P2}__opd`: not run",
    ]


def test_fig3a_a_settings_seeds_share_one_look_and_one_legend_entry(tmp_path, drawn):
    """Seeds 0 and 1 of two settings: four bold lines, each setting's two in one colour, two legend entries."""
    lam = {"kind": "train", "seeds": [0, 1], "include": [{"pairing": P1, "method": "gropd", "gropd.lam": 0.5},
                                                         {"pairing": P1, "method": "opd"}]}  # fmt: skip
    write_experiments(tmp_path, grids={"lambda": lam, "gamma": None, "table6": None})
    for run_id in (f"lambda__{P1}__gropd-lam0.5", f"lambda__{P1}__opd"):
        for seed in (0, 1):
            rows = metric_rows(30, verifier_reward=lambda s, seed=seed: 0.3 + 0.01 * seed)
            write_run(tmp_path / "results", "tiny", seeded(run_id, seed), metrics=rows)
    figures.fig3(evidence(tmp_path))
    (ax,) = drawn["fig3"]["figures"]["fig3a"].axes
    bold = [b for _, _, b in triples(ax.get_lines())]
    assert len(bold) == 4 and bold[0].get_color() == bold[1].get_color() != bold[2].get_color() == bold[3].get_color()
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["GR-OPD (λ=0.5, γ=0.99)", "vanilla OPD"]
    assert "seeds 0, 1" in drawn["fig3"]["figures"]["fig3a"].get_suptitle()


def test_fig3b_dashes_gamma_one(world, drawn):
    figures.fig3(evidence(world))
    (ax,) = drawn["fig3"]["figures"]["fig3b"].axes
    assert [(bold.get_label(), bold.get_linestyle()) for _, _, bold in triples(ax.get_lines())] == [
        ("GR-OPD (λ=0.2, γ=0.99)", "-"),
        ("GR-OPD (λ=0.2, γ=1)", "--"),
        ("GR-OPD (λ=0.25, γ=0.99)", "-"),
        ("GR-OPD (λ=0.25, γ=1)", "--"),
    ]


def test_fig4_centred_averages_and_a_log_axis_with_plain_ticks(world, drawn):
    figures.fig4(evidence(world))
    fig = drawn["fig4"]["figures"]["fig4"]
    a, b, c, d = fig.axes
    assert [ax.get_yscale() for ax in (a, b, c, d)] == ["log", "linear", "linear", "linear"]
    assert a.get_ylabel() == "mean response length (tokens)" and d.get_title() == "(D) Spearman(S, reward)"
    assert [len(ax.get_lines()) for ax in (a, b, c, d)] == [4, 4, 4, 2]  # λ = .2 has no Spearman values
    assert [line.get_linestyle() for line in a.get_lines()] == ["-", "--", "-", "--"]
    assert list(c.get_lines()[0].get_xdata()) == list(range(2, 31, 2))  # null Pearson steps skipped
    lengths = [47.0 + 0.25 * s for s in range(1, 31)]
    assert list(a.get_lines()[1].get_ydata()) == pytest.approx(moving_mean(lengths, 10, True))
    assert a.get_lines()[1].get_ydata()[0] == pytest.approx(statistics.fmean(lengths[:6]))  # v_1..v_6 (window 10)
    fig.canvas.draw()
    labels = [t.get_text() for t in a.get_yticklabels() + a.get_yticklabels(minor=True) if t.get_text()]
    assert labels and all(label.replace(".", "").isdigit() for label in labels)  # "48", never "4.8×10¹"
    assert "seed 0" in fig.get_suptitle()
    assert f"`gamma__{P2}__gropd-lam0.2-gamma0.99`: no spearman_score_reward in metrics.jsonl" in drawn["fig4"]["notes"]


def test_fig1_j_h_by_hand_and_the_peak_from_the_full_curve(world, drawn):
    figures.fig1(evidence(world))
    b = drawn["figure1"]["figures"]["figure1"].axes[0]
    curve, dot, chance = b.get_lines()
    assert list(curve.get_xdata()) == list(range(1, 9))  # 40 cube-root points over 1..8 hit every integer
    assert list(curve.get_ydata()) == pytest.approx(J_EXPECTED, abs=1e-12)
    assert (list(dot.get_xdata()), list(dot.get_ydata())) == ([1], [1.0]) and list(chance.get_ydata()) == [0.5, 0.5]
    assert b.get_xscale() == "function" and b.get_ylabel() == "J_H(H): within-prompt AUC"
    assert drawn["figure1"]["points"] == [
        "I4nothink→I1.7nothink, seed 0: peak J_H = 1.000 at H = 1 tokens of 8 (2 of 3 prompts informative; mean "
        "reward 0.667)"
    ]
    assert drawn["figure1"]["notes"][:2] == [
        f"`fig1__{P2}__score`: no horizon.json (a scoring pass writes it)",
        f"`fig1__{P3}__score`: J_H undefined: no prompt has both correct and incorrect responses (1 prompts)",
    ]


def test_fig1_peak_off_the_drawn_grid_is_found_and_drawn(tmp_path, drawn):
    """100 horizons with the peak at H = 37; 4 drawn points (1, 8 or so, …, 100) would miss it."""
    write_experiments(tmp_path, grids={"fig1": FIG1, "table6": None}, report={"fig1": {"horizon_points": 4}})
    values = [0.5 + (0.4 if h == 37 else 0.1) for h in range(1, 101)]
    curve = {"horizons": list(range(1, 101)), "values": values, "informative": 5, "prompts": 8, "reward": 0.5}
    write_run(tmp_path / "results", "tiny", f"fig1__{P1}__score", horizon=curve)
    figures.fig1(evidence(tmp_path))
    line, dot = drawn["figure1"]["figures"]["figure1"].axes[0].get_lines()[:2]
    assert 37 in list(line.get_xdata()) and len(line.get_xdata()) == 5
    assert (list(dot.get_xdata()), list(dot.get_ydata())) == ([37], [pytest.approx(0.9)])
    assert drawn["figure1"]["points"][0].startswith(
        "I4nothink→I1.7nothink, seed 0: peak J_H = 0.900 at H = 37 tokens of 100"
    )


def test_fig1_seeds_of_a_pairing_share_its_colour_and_its_peak_is_their_mean(tmp_path, drawn):
    """Seeds 0 and 1 of I4nothink, peaks 0.9 (H = 3) and 0.7 (H = 5), seed 0 of I32nothink 0.6: one colour per
    pairing, a line style per seed; the pairing's peak 0.800 ± 0.141 (sample std of 0.9, 0.7: 0.2/√2)."""
    grid = {
        "kind": "train",
        "seeds": [0, 1],
        "include": [{"kind": "score", "pairing": P1}, {"kind": "score", "pairing": P2}],
    }
    write_experiments(tmp_path, grids={"fig1": grid, "table6": None})
    for run_id, peak_at, peak in (
        (f"fig1__{P1}__score", 3, 0.9),
        (f"fig1__{P1}__score__seed1", 5, 0.7),
        (f"fig1__{P2}__score", 2, 0.6),
    ):
        values = [peak if h == peak_at else 0.55 for h in range(1, 9)]
        curve = {"horizons": list(range(1, 9)), "values": values, "informative": 2, "prompts": 4, "reward": 0.5}
        write_run(tmp_path / "results", "tiny", run_id, horizon=curve)
    figures.fig1(evidence(tmp_path))
    b = drawn["figure1"]["figures"]["figure1"].axes[0]
    first, _, second, _, other = b.get_lines()[:5]
    assert first.get_color() == second.get_color() != other.get_color()
    assert (first.get_linestyle(), second.get_linestyle(), other.get_linestyle()) == ("-", "--", "-")
    assert [t.get_text() for t in b.get_legend().get_texts()] == ["I4nothink→I1.7nothink", "I32nothink→I1.7nothink"]
    points = drawn["figure1"]["points"]
    assert [p.split(" at ")[0] for p in points[:3]] == [
        "I4nothink→I1.7nothink, seed 0: peak J_H = 0.900",
        "I4nothink→I1.7nothink, seed 1: peak J_H = 0.700",
        "I32nothink→I1.7nothink, seed 0: peak J_H = 0.600",
    ]
    assert points[3:] == ["I4nothink→I1.7nothink: peak J_H 0.800 ± 0.141 over seeds 0, 1 (mean ± sample std)"]


def test_fig1_raw_score_drawn_over_gropd_with_the_cap(world, drawn):
    figures.fig1(evidence(world))
    _, c, d = drawn["figure1"]["figures"]["figure1"].axes
    *runs, cap = c.get_lines()
    assert list(cap.get_ydata()) == [200, 200] and cap.get_label() == "generation cap (200 tokens)"
    (_, _, gropd_bold), (faint, _, raw_bold) = triples(runs)  # GR-OPD first, the raw score on top
    assert list(faint.get_ydata()) == [20.0 + 15 * s for s in range(1, 31)]
    assert raw_bold.get_zorder() > gropd_bold.get_zorder() and raw_bold.get_linestyle() == "-."
    assert to_rgba(raw_bold.get_color()) == to_rgba("tab:blue") != to_rgba(gropd_bold.get_color())
    assert (
        c.get_ylabel() == "mean response length (tokens)"
        and d.get_ylabel() == "mean verifier reward (fraction correct)"
    )
    assert f"`fig1__{P1}__gropd-lam0.25`: running, step 5 of 12 (partial line)" in drawn["figure1"]["notes"]


def test_build_writes_png_pdf_markdown_and_provenance(world):
    paths = build(
        ["fig3", "fig4", "fig1"],
        profile="tiny",
        results_root=world / "results",
        experiments_dir=world / "experiments",
        out_root=world / "out",
    )
    out = world / "out" / "tiny"
    assert {p.name for p in paths} == {
        *(f"{stem}.{ext}" for stem in ("fig3a", "fig3b", "fig4", "figure1") for ext in ("png", "pdf")),
        *(f"{name}.{ext}" for name in ("fig3", "fig4", "figure1") for ext in ("md", "provenance.json")),
        *("index.html", "index.provenance.json"),
    }
    assert (out / "fig3a.png").read_bytes()[:4] == b"\x89PNG" and (out / "fig4.pdf").read_bytes()[:4] == b"%PDF"
    fig3 = (out / "fig3.md").read_text()
    assert "Drawn: seed 0 (one run per setting" in fig3 and f"Built from `{world / 'results' / 'tiny'}/`" in fig3
    assert f"- `lambda__{P2}__opd`: not run" in fig3
    provenance = json.loads((out / "fig3.provenance.json").read_text())
    assert provenance["missing"] == [line[2:] for line in fig3.splitlines() if line.startswith("- `")]

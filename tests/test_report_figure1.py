"""Figure 1(b–d) rebuilt from results fixtures written here: J_H curves by hand, raw vs GR-OPD lines, the cap."""

from __future__ import annotations

import json

import pytest
import torch
import yaml
from matplotlib.colors import to_rgba
from report_fixtures import P1, P2, P3, dump, report_context, write_experiments, write_run

from gropd.horizon import separation_curve
from gropd.report import build
from gropd.report.figure1 import build_figure1
from gropd.report.plotting import trailing_mean

FIG1 = {
    "name": "fig1",
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
AUC_A = [1, 1, 1, 1, 1, 0.5, 0, 0]
AUC_B = [1, 1, 1, 0, 0, 0, 0, 0]
J_EXPECTED = [(a + b) / 2 for a, b in zip(AUC_A, AUC_B, strict=True)]


def saved_batch(rows, group_size, width=8):
    """A dump_rollout-shaped record from (f values, correct) rows, right-padded to `width`."""
    f, mask = torch.zeros(len(rows), width), torch.zeros(len(rows), width)
    for i, (values, _) in enumerate(rows):
        f[i, : len(values)] = torch.tensor(values, dtype=torch.float32)
        mask[i, : len(values)] = 1
    correct = torch.tensor([c for _, c in rows], dtype=torch.bool)
    return {"f": f, "mask": mask, "correct": correct, "group_size": group_size, "S": f.sum(1), "advantages": None}


def write_score_run(results, pairing, batches):
    """A finished scoring pass: its batches and the horizon.json the pass writes from them."""
    path = write_run(results, "tiny", f"fig1__{pairing}__score", fields={"kind": "score", "pairing": pairing})
    (path / "batches").mkdir()
    for step, batch in enumerate(batches, 1):
        torch.save(batch, path / "batches" / f"step_{step}_rank0.pt")
    if batches:
        (path / "horizon.json").write_text(json.dumps(separation_curve(batches)))
    return path


def rows(n, **metrics):
    return [{"step": s, **{k: f(s) for k, f in metrics.items()}} for s in range(1, n + 1)]


@pytest.fixture
def world(tmp_path):
    write_experiments(tmp_path)
    dump(tmp_path / "experiments" / "grids" / "fig1.yaml", FIG1)
    res = tmp_path / "results"
    write_score_run(
        res,
        P1,
        [
            saved_batch([([1, 1, 1, 0, 0, 0, 0, 0], True), ([0, 0, 0, 1, 1, 1, 1, 1], False)], 2),
            saved_batch([([1, 0], True), ([0, 0, 0, 3], False), ([2], True), ([5, 5], True)], 2, width=4),
        ],
    )
    write_score_run(res, P2, [])  # a pass that saved nothing
    write_score_run(res, P3, [saved_batch([([1, 0], False), ([0, 1], False)], 2)])
    raw = write_run(
        res,
        "tiny",
        f"fig1__{P1}__raw",
        fields={"kind": "train", "pairing": P1, "method": "raw", "gamma": 0.99},
        metrics=rows(12, mean_response_len=lambda s: 20.0 + 15 * s, verifier_reward=lambda s: 0.6 - 0.05 * s),
    )
    dump(raw / "config.yaml", {"train": {"steps": 12}, "sampling": {"max_new_tokens": 200}})
    write_run(
        res,
        "tiny",
        f"fig1__{P1}__gropd-lam0.25",
        "running",
        step=5,
        steps=12,
        fields={"kind": "train", "pairing": P1, "method": "gropd", "lam": 0.25, "gamma": 0.99},
        metrics=rows(5, mean_response_len=lambda s: 30.0, verifier_reward=lambda s: 0.5),
    )
    return tmp_path


def test_panel_b_draws_j_h_by_hand_on_a_cube_root_axis(world):
    figures, peaks = build_figure1(report_context(world))
    b = figures.figures["figure1"].axes[0]
    curve, dot, chance = b.get_lines()
    assert list(curve.get_xdata()) == list(range(1, 9))  # 40 cube-root points over 1..8 hit every integer
    assert list(curve.get_ydata()) == pytest.approx(J_EXPECTED, abs=1e-12)
    assert (list(dot.get_xdata()), list(dot.get_ydata())) == ([1], [1.0])
    assert list(chance.get_ydata()) == [0.5, 0.5]
    assert b.get_xscale() == "function"
    assert [t.get_text() for t in b.get_legend().get_texts()] == ["I4nothink→I1.7nothink (2)"]
    assert peaks == [
        "I4nothink→I1.7nothink: peak J_H = 1.000 at H = 1 tokens (2 of 3 prompts informative; mean reward 0.667)"
    ]
    assert f"run fig1__{P2}__score: no horizon.json (a scoring pass writes it)" in figures.missing[0]
    assert figures.missing[1] == (
        f"run fig1__{P3}__score: no prompt has both correct and incorrect responses (1 prompts, mean reward 0.000)"
    )


def test_panels_c_d_raw_against_gropd_with_the_cap(world):
    figures, _ = build_figure1(report_context(world))
    _, c, d = figures.figures["figure1"].axes
    *runs, cap = c.get_lines()
    assert list(cap.get_ydata()) == [200, 200] and cap.get_label() == "generation cap (200 tokens)"
    (faint, bold, last), (_, gropd_bold, _) = runs[:3], runs[3:]
    lengths = [20.0 + 15 * s for s in range(1, 13)]
    assert list(faint.get_ydata()) == lengths
    assert list(bold.get_ydata()) == pytest.approx(trailing_mean(lengths, 10))
    assert list(last.get_xdata()) == [12]
    assert to_rgba(bold.get_color()) == to_rgba("tab:blue") and to_rgba(gropd_bold.get_color()) != to_rgba("tab:blue")
    assert [t.get_text() for t in c.get_legend().get_texts()] == [
        "raw score (γ=0.99)",
        "GR-OPD (λ=0.25, γ=0.99)",
        "generation cap (200 tokens)",
    ]
    rewards = [0.6 - 0.05 * s for s in range(1, 13)]
    assert list(d.get_lines()[0].get_ydata()) == pytest.approx(rewards)
    assert "I4nothink→I1.7nothink" in c.get_title() and c.get_title().startswith("(c)")
    assert f"run fig1__{P1}__gropd-lam0.25: running, step 5 of 12 (partial line)" in figures.missing


def test_build_writes_figure1_files_caption_and_provenance(world):
    paths = build(
        ["fig1"],
        profile="tiny",
        results_root=world / "results",
        experiments_dir=world / "experiments",
        out_root=world / "out",
    )
    assert {p.name for p in paths} == {"figure1.png", "figure1.pdf", "figure1.md", "figure1.provenance.json"}
    out = world / "out" / "tiny"
    assert (out / "figure1.png").read_bytes()[:4] == b"\x89PNG"
    text = (out / "figure1.md").read_text()
    assert "J_H(H) is ours (the paper gives no formula)" in text and "peak J_H = 1.000 at H = 1 tokens" in text
    provenance = yaml.safe_load((out / "figure1.provenance.json").read_text())
    assert len(provenance["runs"]) == 5 and "experiments/grids/fig1.yaml" in " ".join(provenance["manifests"])


def test_missing_and_unreadable_results_still_draw(world):
    (world / "results" / "tiny" / f"fig1__{P1}__score" / "horizon.json").write_text('{"horizons": [1,')
    figures, peaks = build_figure1(report_context(world))
    assert peaks == [] and "unreadable horizon.json (not valid JSON" in figures.missing[0]
    write_experiments(world / "empty")
    dump(world / "empty" / "experiments" / "grids" / "fig1.yaml", FIG1)
    figures, _ = build_figure1(report_context(world / "empty"))
    assert len(figures.missing) == 5 and all(line.endswith("not run") for line in figures.missing)

"""The manifests say what the paper says (docs/DESIGN.md §2, Tables 3–5), and grids expand as designed."""

from __future__ import annotations

from pathlib import Path

from gropd.config import load_manifests, resolve_run
from gropd.config.grids import expand_grid, load_grid

REPO = Path(__file__).resolve().parents[1]
EXPERIMENTS = REPO / "experiments"

PAPER_SUITES = {  # Table 5: questions, K
    "aime24": (30, 32),
    "aime25": (30, 32),
    "amc23": (40, 32),
    "math500": (500, 8),
    "minerva": (272, 8),
    "olympiadbench": (170, 8),
}
PAPER_MODELS = {  # Table 4
    "B1.7": ("Qwen/Qwen3-1.7B-Base", "ea980cb"),
    "B4": ("Qwen/Qwen3-4B-Base", "906bfd4"),
    "I1.7": ("Qwen/Qwen3-1.7B", "70d244c"),
    "I4": ("Qwen/Qwen3-4B", "1cfa9a7"),
    "I32": ("Qwen/Qwen3-32B", "9216db5"),
}
PAIRINGS = {"I4nothink-I1.7nothink", "I32nothink-I1.7nothink", "I4think-B1.7", "B4-B1.7", "I32think-B1.7"}


def test_suites_match_table5() -> None:
    suites = load_manifests(EXPERIMENTS).suites["paper"]
    assert {key: (s["paper_questions"], s["k"]) for key, s in suites.items()} == PAPER_SUITES
    assert sum(s["paper_questions"] for s in suites.values()) == 1042


def test_models_match_table4() -> None:
    models = load_manifests(EXPERIMENTS).models["paper"]
    assert {label: (m["source"]["repo"], m["source"]["revision"]) for label, m in models.items()} == PAPER_MODELS
    assert set(load_manifests(EXPERIMENTS).models["tiny"]) == set(PAPER_MODELS)


def test_pairings_and_inferred_flags() -> None:
    pairings = load_manifests(EXPERIMENTS).pairings
    assert set(pairings) == PAIRINGS
    assert {name for name, p in pairings.items() if p["inferred"]} == {"B4-B1.7", "I32think-B1.7"}
    assert pairings["I4think-B1.7"]["teacher"] == {"model": "I4", "mode": "think"}
    assert pairings["I4think-B1.7"]["student"] == {"model": "B1.7", "mode": "default"}


def test_paper_profile_holds_table3() -> None:
    manifests = load_manifests(EXPERIMENTS)
    entry = expand_grid(load_grid("table1", EXPERIMENTS))[0]
    train = resolve_run(None, "paper", manifests, entry_values=entry.values).train
    table3 = (
        train.prompts_per_batch,
        train.group_size,
        train.per_device_batch,
        train.grad_accum,
        train.replicas,
        train.minibatch_responses,
    )
    assert table3 == (64, 8, 1, 8, 8, 64)
    assert train.prompts_per_batch * train.group_size // train.minibatch_responses == 8  # optimiser steps per batch


def test_gropd_defaults_match_the_paper() -> None:
    manifests = load_manifests(EXPERIMENTS)
    entry = expand_grid(load_grid("table1", EXPERIMENTS))[0]
    config = resolve_run(None, "paper", manifests, entry_values=entry.values)
    assert config.gropd.gamma == 0.99 and config.gropd.std == "unbiased"


def test_table1_expands_to_ten_runs() -> None:
    entries = expand_grid(load_grid("table1", EXPERIMENTS))
    pairs = {(e.values["pairing"], e.values["method"]) for e in entries}
    assert len(entries) == 10
    assert pairs == {(p, m) for p in PAIRINGS for m in ("gropd", "opd")}
    assert "table1__I4nothink-I1.7nothink__gropd" in {e.run_id for e in entries}


def test_lambda_grid_covers_table2_rows() -> None:
    entries = expand_grid(load_grid("lambda", EXPERIMENTS))
    rows = {(e.values["pairing"], e.values.get("gropd.lam")) for e in entries if e.values["method"] == "gropd"}
    assert rows >= {
        ("I4nothink-I1.7nothink", 0.5),
        ("I4nothink-I1.7nothink", 0.25),
        ("I4nothink-I1.7nothink", 0.2),
        ("I32nothink-I1.7nothink", 0.25),
        ("I32nothink-I1.7nothink", 0.2),
        ("I4think-B1.7", 0.0),
    }


def test_gamma_grid_and_seeds() -> None:
    grid = load_grid("gamma", EXPERIMENTS)
    entries = expand_grid(grid, seeds=[0, 1, 2])
    assert len(entries) == 4 * 3
    assert {e.values["gropd.gamma"] for e in entries} == {0.99, 1.0}
    assert "gamma__I32nothink-I1.7nothink__gropd-lam0.2-gamma1__seed2" in {e.run_id for e in entries}


def test_fig1_grid_scores_every_pairing_and_trains_raw_against_gropd() -> None:
    entries = expand_grid(load_grid("fig1", EXPERIMENTS))
    scoring = {e.values["pairing"]: e for e in entries if e.values["kind"] == "score"}
    training = [e for e in entries if e.values["kind"] == "train"]
    assert set(scoring) == PAIRINGS
    assert scoring["I4think-B1.7"].run_id == "fig1__I4think-B1.7__score"
    assert all("method" not in e.values and e.values["train.steps"] >= 1 for e in scoring.values())
    assert {(e.values["method"], e.values.get("gropd.lam")) for e in training} == {("raw", None), ("gropd", 0.25)}
    assert len({e.values["pairing"] for e in training}) == 1  # one matched pairing for panels (c, d)
    manifests = load_manifests(EXPERIMENTS)
    raw = resolve_run(None, "tiny", manifests, entry_values=training[0].values)
    assert raw.run_id == "fig1__I4nothink-I1.7nothink__raw" and raw.method == "raw" and raw.gropd.gamma == 0.99


def test_every_run_of_every_grid_resolves_in_both_profiles() -> None:
    manifests = load_manifests(EXPERIMENTS)
    for name in ("table1", "lambda", "gamma", "table6", "fig1"):
        for entry in expand_grid(load_grid(name, EXPERIMENTS)):
            for profile in ("paper", "tiny"):
                config = resolve_run(None, profile, manifests, entry_values=entry.values)
                assert config.run_id == entry.run_id and config.profile == profile

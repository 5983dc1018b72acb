"""Fixture writers for the report tests: a small experiments/ tree and results/ runs in tmp_path.

Run ids follow gropd.config.grids (`<grid>__<pairing>__<method>[-lam0.5…][__seed<N>]`).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import yaml

from gropd.report.context import ReportContext
from gropd.report.settings import load_settings

REPO = Path(__file__).resolve().parents[1]
P1, P2, P3, P4 = "I4nothink-I1.7nothink", "I32nothink-I1.7nothink", "I4think-B1.7", "B4-B1.7"
P5 = "I32think-B1.7"
TINY_SUITES = ("add", "sub", "mul")
PAPER_SUITES = {  # key: (title, K, paper questions), docs/DESIGN.md §2 (Table 5)
    "aime24": ("AIME 2024", 32, 30),
    "aime25": ("AIME 2025", 32, 30),
    "amc23": ("AMC 2023", 32, 40),
    "math500": ("MATH-500", 8, 500),
    "minerva": ("Minerva Math", 8, 272),
    "olympiadbench": ("OlympiadBench", 8, 170),
}


def dump(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def write_experiments(
    root: Path, table1_seeds: tuple[int, ...] = (0,), report: dict | None = None, grids: dict[str, dict] | None = None
) -> Path:
    """A small experiments/ tree: the real models/pairings/train/profiles/report.yaml, own grids and suites;
    `grids` replaces the named default grids (name -> grid body without its `name`)."""
    exp = root / "experiments"
    exp.mkdir(parents=True)
    for name in ("models.yaml", "pairings.yaml", "train.yaml"):
        shutil.copy(REPO / "experiments" / name, exp / name)
    shutil.copytree(REPO / "experiments" / "profiles", exp / "profiles")
    real_report = yaml.safe_load((REPO / "experiments" / "report.yaml").read_text())
    dump(exp / "report.yaml", {**real_report, **(report or {})})
    dump(
        exp / "suites.yaml",
        {
            "paper": {k: {"title": t, "k": k_, "paper_questions": q} for k, (t, k_, q) in PAPER_SUITES.items()},
            "tiny": {k: {"title": k.upper(), "k": 4, "paper_questions": None} for k in TINY_SUITES},
        },
    )
    defaults = {
        "table1": {
            "name": "table1",
            "kind": "train",
            "seeds": list(table1_seeds),
            "matrix": {"pairing": [P1, P2, P3, P4], "method": ["gropd", "opd"]},
            "set": [{"when": {"pairing": P1, "method": "gropd"}, "values": {"gropd": {"lam": 0.25}}}],
        },
        "lambda": {
            "name": "lambda",
            "kind": "train",
            "seeds": [0],
            "include": [
                {"pairing": P1, "method": "gropd", "gropd.lam": 0.5},
                {"pairing": P1, "method": "gropd", "gropd.lam": 0.25},
                {"pairing": P1, "method": "opd"},
                {"pairing": P2, "method": "gropd", "gropd.lam": 0.25},
                {"pairing": P2, "method": "opd"},
            ],
        },
        "gamma": {
            "name": "gamma",
            "kind": "train",
            "seeds": [0],
            "matrix": {"pairing": [P2], "method": ["gropd"], "gropd.lam": [0.2, 0.25], "gropd.gamma": [0.99, 1.0]},
        },
        "table6": {
            "name": "table6",
            "kind": "eval",
            "seeds": [0],
            "include": [{"model": "B1.7", "mode": "default"}, {"model": "I4", "mode": "think"}],
        },
    }
    defaults.update({name: {"name": name, **body} for name, body in (grids or {}).items()})
    for name, grid in defaults.items():
        dump(exp / "grids" / f"{name}.yaml", grid)
    return exp


def summary(
    scores: dict[str, float], questions: dict[str, int] | None = None, tokens: dict[str, float] | None = None
) -> dict[str, Any]:
    """An eval/summary.json with the given per-suite Avg@K."""
    return {
        "model": "m",
        "mode": "nothink",
        "macro": None,
        "suites": {
            suite: {
                "avg_at_k": score,
                "k": 4,
                "questions": (questions or {}).get(suite, 50),
                "paper_questions": None,
                "mean_tokens": (tokens or {}).get(suite, 100.0),
            }
            for suite, score in scores.items()
        },
    }


def write_run(
    results: Path,
    profile: str,
    run_id: str,
    state: str = "finished",
    *,
    fields: dict | None = None,
    metrics: list[dict] | None = None,
    eval_summary: dict | None = None,
    steps: int | None = None,
    step: int = 0,
    collapse_step: int | None = None,
    reason: str | None = None,
    config: dict | None = None,
) -> Path:
    """results/<profile>/<run_id>/ with status.json and optionally metrics, summary and config.yaml
    (`config` is written as the resolved config; `steps` sets its train.steps)."""
    path = results / profile / run_id
    path.mkdir(parents=True)
    status = {
        "run_id": run_id,
        "config_hash": f"hash-{run_id}",
        "status": state,
        "reason": reason,
        "step": step,
        "collapse_step": collapse_step,
        **(fields or {}),
    }
    (path / "status.json").write_text(json.dumps(status))
    if metrics is not None:
        (path / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in metrics))
    if eval_summary is not None:
        (path / "eval").mkdir()
        (path / "eval" / "summary.json").write_text(json.dumps(eval_summary))
    if steps is not None or config is not None:
        resolved = dict(config or {})
        if steps is not None:
            resolved["train"] = {**resolved.get("train", {}), "steps": steps}
        dump(path / "config.yaml", resolved)
    return path


def report_context(root: Path, profile: str = "tiny", exp: Path | None = None) -> ReportContext:
    """The ReportContext of the fixture tree under `root` (experiments/ unless `exp`, results/; output in out/)."""
    exp = exp or root / "experiments"
    return ReportContext(
        profile=profile,
        results_root=root / "results",
        experiments_dir=exp,
        out_dir=root / "out" / profile,
        settings=load_settings(exp / "report.yaml"),
    )


def metric_rows(n: int, **metrics: Any) -> list[dict]:
    """n rollout batches (steps 1..n); each metric a list of n values, a function of the step, or a constant."""

    def value(spec: Any, step: int) -> Any:
        if callable(spec):
            return spec(step)
        return spec[step - 1] if isinstance(spec, list) else spec

    return [{"step": s, **{k: value(spec, s) for k, spec in metrics.items()}} for s in range(1, n + 1)]


def seeded(run_id: str, seed: int) -> str:
    """The run id of `seed` of a run whose seed-0 id is `run_id` (gropd.config.grids)."""
    return run_id + (f"__seed{seed}" if seed else "")


def macro_summary(value: float) -> dict[str, Any]:
    """An eval/summary.json with tiny suites add/sub/mul at value − 1, value, value + 1: Macro = value."""
    return summary({"add": value - 1, "sub": value, "mul": value + 1})


def table1_grid(*pairings: str) -> dict[str, Any]:
    """A table1 grid body over `pairings` x {gropd, opd}, seed 0, λ = 0.25 for the matched pairings."""
    return {
        "kind": "train",
        "seeds": [0],
        "matrix": {"pairing": list(pairings), "method": ["gropd", "opd"]},
        "set": [
            {"when": {"pairing": p, "method": "gropd"}, "values": {"gropd": {"lam": 0.25}}}
            for p in pairings
            if p in (P1, P2, P4)
        ],
    }

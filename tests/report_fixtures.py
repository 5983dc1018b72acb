"""Fixture writers for the report tests: a small experiments/ tree and results/ runs in tmp_path.

A run written here is what a real run leaves: its grid entry resolved through gropd.config (then any
`config` values merged over it) saved as config.yaml, and a status.json whose config_hash is that file's
data_hash, so it passes the hash check reports apply. Run ids follow gropd.config.grids
(`<grid>__<pairing>__<method>[-lam0.5…][__seed<N>]`).
"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import yaml

from gropd.config import data_hash, load_manifests, resolve_run
from gropd.config.grids import expand_grid, load_grid
from gropd.report.evidence import Evidence
from gropd.report.settings import load_settings

REPO = Path(__file__).resolve().parents[1]
P1, P2, P3, P4 = "I4nothink-I1.7nothink", "I32nothink-I1.7nothink", "I4think-B1.7", "B4-B1.7"
P5 = "I32think-B1.7"
TINY_SUITES = ("add", "sub", "mul")
STEPS = 10  # train.steps of the fixtures' tiny profile: a finished run's metric rows (metric_rows(STEPS, ...))
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
    root: Path,
    table1_seeds: tuple[int, ...] = (0,),
    report: dict | None = None,
    grids: dict[str, dict] | None = None,
    steps: int = STEPS,
) -> Path:
    """A small experiments/ tree: the real models/pairings/train/profiles/report.yaml, own grids and suites;
    `grids` replaces or adds the named grids (name -> grid body without its `name`; None removes it); the tiny
    profile's train.steps is `steps` (a finished run's metric rows: RunDir.record_problem)."""
    exp = root / "experiments"
    exp.mkdir(parents=True)
    for name in ("models.yaml", "pairings.yaml", "train.yaml", "registration.yaml"):
        shutil.copy(REPO / "experiments" / name, exp / name)
    shutil.copytree(REPO / "experiments" / "profiles", exp / "profiles")
    tiny = exp / "profiles" / "tiny.yaml"
    tiny.write_text(tiny.read_text().replace("\n  steps: 100 ", f"\n  steps: {steps} ", 1))
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
        "table1": table1_grid(P1, P2, P3, P4, seeds=table1_seeds),
        "lambda": {
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
            "kind": "train",
            "seeds": [0],
            "matrix": {"pairing": [P2], "method": ["gropd"], "gropd.lam": [0.2, 0.25], "gropd.gamma": [0.99, 1.0]},
        },
        "table6": {
            "kind": "eval",
            "seeds": [0],
            "include": [{"model": "B1.7", "mode": "default"}, {"model": "I4", "mode": "think"}],
        },
    }
    defaults.update(grids or {})
    for name, body in defaults.items():
        if body is not None:
            dump(exp / "grids" / f"{name}.yaml", {"name": name, **body})
    return exp


def table1_grid(*pairings: str, seeds: tuple[int, ...] = (0,)) -> dict[str, Any]:
    """A table1 grid body over `pairings` x {gropd, opd}, λ = 0.25 for the matched pairings (as the real grid)."""
    return {
        "kind": "train",
        "seeds": list(seeds),
        "matrix": {"pairing": list(pairings), "method": ["gropd", "opd"]},
        "set": [
            {"when": {"pairing": p, "method": "gropd"}, "values": {"gropd": {"lam": 0.25}}}
            for p in pairings
            if p in (P1, P2, P4)
        ],
    }


def merged(base: dict, extra: dict) -> dict:
    out = copy.deepcopy(base)
    for key, value in extra.items():
        out[key] = merged(out.get(key) or {}, value) if isinstance(value, dict) else value
    return out


def resolved(exp: Path, profile: str, run_id: str) -> dict[str, Any]:
    """The config the run's grid entry resolves to now."""
    grid, tail = run_id.split("__", 1)[0], run_id.rsplit("__", 1)[-1]
    seed = int(tail[4:]) if tail.startswith("seed") and tail[4:].isdigit() else 0
    entry = next(e for e in expand_grid(load_grid(grid, exp), [seed]) if e.run_id == run_id)
    return resolve_run(None, profile, load_manifests(exp), entry_values=entry.values).model_dump(mode="json")


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
    step: int | None = None,
    collapse_step: int | None = None,
    reason: str | None = None,
    config: dict | None = None,
    horizon: dict | None = None,
) -> Path:
    """results/<profile>/<run_id>/: config.yaml (the grid entry of experiments/ beside `results`, resolved, with
    `config` merged over it and `steps` as train.steps), status.json (its hash) and optionally metrics.jsonl,
    eval/summary.json and horizon.json."""
    path = results / profile / run_id
    path.mkdir(parents=True)
    resolved_config = merged(resolved(results.parent / "experiments", profile, run_id), config or {})
    if steps is not None:
        resolved_config["train"]["steps"] = steps
    dump(path / "config.yaml", resolved_config)
    metrics = sound_metrics(resolved_config, state, metrics, collapse_step)
    status = {
        "run_id": run_id,
        "profile": profile,
        "config_hash": data_hash(resolved_config),
        "status": state,
        "reason": reason,
        "step": len(metrics or []) if step is None else step,  # as a run records it: its last logged step
        "collapse_step": collapse_step,
        **(fields or {}),
    }
    (path / "status.json").write_text(json.dumps(status))
    if metrics is not None:
        (path / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in metrics))
    if eval_summary is not None:
        (path / "eval").mkdir()
        (path / "eval" / "summary.json").write_text(json.dumps(eval_summary))
    if horizon is not None:
        (path / "horizon.json").write_text(json.dumps(horizon))
    return path


def sound_metrics(config: dict, state: str, metrics: list[dict] | None, collapse_step: int | None) -> list[dict] | None:
    """The metric rows a record of `state` must hold to be believed (RunDir.record_problem): a train run finished or
    trained without rows given gets train.steps rows of its step alone; a collapsed one (rows given or not) its
    collapse step's loss non-finite (null, flagged), the collapse its metrics bear out."""
    if config.get("kind") != "train" or (metrics is not None and state != "collapsed"):
        return metrics
    if state in ("finished", "trained") and metrics is None:
        return metric_rows(config["train"]["steps"])
    if state == "collapsed" and collapse_step is not None:
        rows = [dict(row) for row in (metrics if metrics is not None else metric_rows(collapse_step))]
        rows[-1] |= {"loss": None, "non_finite": {"loss": "nan"}}
        return rows
    return metrics


def evidence(root: Path, profile: str = "tiny") -> Evidence:
    """The evidence layer of the fixture tree under `root` (experiments/, results/)."""
    exp = root / "experiments"
    return Evidence(profile, root / "results", exp, load_settings(exp / "report.yaml"))


def summary(
    scores: dict[str, float],
    questions: dict[str, int] | None = None,
    tokens: dict[str, float] | None = None,
    k: int | dict[str, int] = 4,
) -> dict[str, Any]:
    """An eval/summary.json with the given per-suite Avg@K (`k`: every suite's K, or suite -> K)."""
    return {
        "model": "m",
        "mode": "nothink",
        "suites": {
            suite: {
                "avg_at_k": score,
                "k": k[suite] if isinstance(k, dict) else k,
                "questions": (questions or {}).get(suite, 300),  # the tiny profile's eval.questions
                "paper_questions": None,
                "mean_tokens": (tokens or {}).get(suite, 100.0),
            }
            for suite, score in scores.items()
        },
    }


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


def macro_summary(value: float, k: int = 4) -> dict[str, Any]:
    """An eval/summary.json with tiny suites add/sub/mul at value − 1, value, value + 1: Macro = value."""
    return summary({"add": value - 1, "sub": value, "mul": value + 1}, k=k)


def scored(root: Path, base: str, macros: list[float | None], profile: str = "tiny", **kw: Any) -> None:
    """One finished run per macro (seed = position; seeds beyond the grid's own are on disk as `--seeds N`
    leaves them); a None macro writes a seed collapsed at step 5 instead."""
    for seed, value in enumerate(macros):
        if value is None:
            write_run(root / "results", profile, seeded(base, seed), "collapsed", collapse_step=5, **kw)
        else:
            write_run(root / "results", profile, seeded(base, seed), eval_summary=macro_summary(value), **kw)

"""How runs are named in tables and legends: method, λ and γ, with the profile's defaults filled in."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gropd.report.loading import GridRun

METHOD_NAMES = {"gropd": "GR-OPD", "opd": "vanilla OPD", "raw": "raw score"}


@dataclass(frozen=True)
class RunParams:
    """The credit rule of a run; lam is None unless GR-OPD, gamma None for vanilla OPD (it has neither)."""

    method: str
    lam: float | None
    gamma: float | None


def run_params(run: GridRun, defaults: dict[str, Any]) -> RunParams:
    """Method, λ and γ from status.json, else the grid, else train.yaml + profile (`defaults`).
    The raw score has a γ (its S_i is discounted) and no λ."""
    method = str(run.field("method"))
    if method not in ("gropd", "raw"):
        return RunParams(method=method, lam=None, gamma=None)
    gropd = defaults.get("gropd") or {}
    return RunParams(
        method=method,
        lam=float(run.field("lam", gropd.get("lam"))) if method == "gropd" else None,
        gamma=float(run.field("gamma", gropd.get("gamma"))),
    )


def num(value: float) -> str:
    """0.25 -> '0.25', 1.0 -> '1', 0.99 -> '0.99'."""
    return f"{value:g}"


def method_label(params: RunParams) -> str:
    """'GR-OPD (λ=0.25, γ=0.99)', 'raw score (γ=0.99)' or 'vanilla OPD'."""
    name = METHOD_NAMES.get(params.method, params.method)
    if params.gamma is None:
        return name
    if params.lam is None:
        return f"{name} (γ={num(params.gamma)})"
    return f"{name} (λ={num(params.lam)}, γ={num(params.gamma)})"


def pairing_title(pairings: dict[str, Any], name: str) -> str:
    """The pairing's display title from pairings.yaml (its key when it has none)."""
    return str((pairings.get(name) or {}).get("title", name))


def run_label(run: GridRun, defaults: dict[str, Any]) -> str:
    """Legend text: the method with λ and γ, and the seed when it is not 0."""
    seed = run.field("seed", 0)
    return method_label(run_params(run, defaults)) + (f", seed {seed}" if seed else "")

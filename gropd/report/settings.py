"""The typed, frozen form of experiments/report.yaml: how reports render results, the claims page's claims
(title, the paper's sentence, the rule that judges it) and the paper's published numbers (`paper_reference`)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError

from gropd.config.errors import ConfigError
from gropd.config.layering import read_yaml
from gropd.config.schema import Strict


class CurveSettings(Strict):
    window: int = Field(ge=1, default=10)  # moving-average window of the bold lines (steps)
    horizon_points: int = Field(ge=2, default=40)  # Figure 1(b): horizons drawn, even in H^(1/3)
    metric: str = "verifier_reward"  # Figure 3's y axis: a key of metrics.jsonl
    pairing: str = "I32nothink-I1.7nothink"  # Figure 4's pairing


class StyleSettings(Strict):
    opd_colour: str = "purple"
    lambda_cmap: str = "YlOrRd"
    gamma_one_linestyle: str = "--"
    raw_colour: str = "tab:blue"
    raw_linestyle: str = "-."


class ClaimSettings(Strict):
    key: str
    title: str
    paper: str  # the paper's sentence
    rule: str  # a rule of gropd/report/claims.py (RULES)
    grids: list[str]
    pairings: Literal["all", "matched", "cross", "matched-nothink"] = "all"


class Table2Reference(Strict):
    pairing: str
    lam: float
    gamma: float
    normalised: float
    retained: float


class Table6Reference(Strict):
    model: str
    mode: str
    macro: float
    mean_tokens: float


class PaperReference(Strict):
    table2: list[Table2Reference] = []
    table6: list[Table6Reference] = []


class ReportSettings(Strict):
    decimals: int = Field(ge=0, default=2)
    fig1: CurveSettings = CurveSettings()
    fig3: CurveSettings = CurveSettings()
    fig4: CurveSettings = CurveSettings()
    style: StyleSettings = StyleSettings()
    rules: dict[str, str] = {}  # each rule's wording, {threshold} names from gropd/report/verdicts.py
    claims: list[ClaimSettings] = []
    paper_reference: PaperReference = PaperReference()


def load_settings(path: Path) -> ReportSettings:
    """Read report.yaml (a missing file means every default); bad keys raise ConfigError naming file and key."""
    data = read_yaml(path) if path.exists() else {}
    try:
        return ReportSettings.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        raise ConfigError(str(path), ".".join(str(part) for part in first["loc"]), first["msg"]) from None

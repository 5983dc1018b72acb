"""The typed, frozen form of experiments/report.yaml: how reports render results, the claims page's claims
(title, the paper's sentence, the rule that judges it) and the paper's published numbers (`paper_reference`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator

from gropd.config.errors import ConfigError
from gropd.config.layering import read_yaml
from gropd.config.schema import Strict, is_config_key
from gropd.credit import BASELINE, METHODS, PROPOSED


class Fig1Settings(Strict):
    horizon_points: int = Field(ge=2, default=40)  # (b): J_H drawn at this many horizons, even in H^(1/3)
    window: int = Field(ge=1, default=10)  # (c, d): the bold lines' trailing moving average (steps)


class Fig3Settings(Strict):
    metric: str = "verifier_reward"  # the y axis: a key of metrics.jsonl
    window: int = Field(ge=1, default=10)


class Fig4Settings(Strict):
    pairing: str = "I32nothink-I1.7nothink"
    window: int = Field(ge=1, default=10)  # centred moving average


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
    compare: list[dict[str, Any]] = [
        {"method": PROPOSED},
        {"method": BASELINE},
    ]  # first, second: config values (dotted)

    @field_validator("compare")
    @classmethod
    def _known_selectors(cls, compare: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Two selectors of config keys a run has, a method by one of its names: a typo is an error, never a
        setting no run matches (which would leave the claim silently "not tested")."""
        if len(compare) != 2:
            raise ValueError(f"{len(compare)} settings (expected two: the first and the second)")
        for selector in compare:
            if unknown := [key for key in selector if not is_config_key(key)]:
                raise ValueError(f"{unknown[0]!r} is not a config key (e.g. method, gropd.lam, train.steps)")
            if "method" in selector and selector["method"] not in METHODS:
                raise ValueError(f"method {selector['method']!r} is not one of {', '.join(METHODS)}")
        return compare


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
    fig1: Fig1Settings = Fig1Settings()
    fig3: Fig3Settings = Fig3Settings()
    fig4: Fig4Settings = Fig4Settings()
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
        problem = first["msg"].removeprefix("Value error, ")
        raise ConfigError(str(path), ".".join(str(part) for part in first["loc"]), problem) from None

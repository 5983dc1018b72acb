"""The typed, frozen form of experiments/report.yaml: how reports render results (no results in it,
except the paper's published numbers, kept apart under `paper_reference`)."""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, ValidationError

from gropd.config.errors import ConfigError
from gropd.config.layering import read_yaml
from gropd.config.schema import Strict


class Table1Settings(Strict):
    decimals: int = Field(ge=0, default=2)


class Table2Settings(Strict):
    decimals: int = Field(ge=0, default=2)


class Table6Settings(Strict):
    macro_decimals: int = Field(ge=0, default=3)
    token_decimals: int = Field(ge=0, default=1)


class Fig1Settings(Strict):
    horizon_points: int = Field(ge=2, default=40)
    window: int = Field(ge=1, default=10)


class Fig3Settings(Strict):
    metric: str = "verifier_reward"
    window: int = Field(ge=1, default=10)


class Fig4Settings(Strict):
    pairing: str = "I32nothink-I1.7nothink"
    window: int = Field(ge=1, default=10)


class StyleSettings(Strict):
    opd_colour: str = "purple"
    lambda_cmap: str = "YlOrRd"
    gamma_one_linestyle: str = "--"
    raw_colour: str = "tab:blue"


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
    matched_gains: list[float] = []  # GR-OPD − vanilla OPD macro points in the two matched non-thinking pairings


class ReportSettings(Strict):
    table1: Table1Settings = Table1Settings()
    table2: Table2Settings = Table2Settings()
    table6: Table6Settings = Table6Settings()
    fig1: Fig1Settings = Fig1Settings()
    fig3: Fig3Settings = Fig3Settings()
    fig4: Fig4Settings = Fig4Settings()
    style: StyleSettings = StyleSettings()
    paper_reference: PaperReference = PaperReference()


def load_settings(path: Path) -> ReportSettings:
    """Read report.yaml (a missing file means every default); bad keys raise ConfigError naming file and key."""
    data = read_yaml(path) if path.exists() else {}
    try:
        return ReportSettings.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        key = ".".join(str(part) for part in first["loc"])
        raise ConfigError(str(path), key, first["msg"]) from None

"""The typed form of experiments/registration.yaml: the thresholds, tests, readings, multiplicity family and seeds
that decide the claims page's verdicts, each version with the commit and date that first wrote it down.

An entry in force (a history's last version) dated after the first run a claim reads began is *set after the runs*;
`first` gives the registration as it stood before (each history's first version), by which the page shows the
verdict too. A grid's registered seeds are those of the plans dated before its first run began; later plans' seeds
are extra.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, model_validator

from gropd.config.errors import ConfigError
from gropd.config.layering import read_yaml
from gropd.config.schema import Strict

FILE = "registration.yaml"


class Dated(Strict):
    """A version of an entry: the commit that first wrote it down and that commit's date (UTC, ISO 8601)."""

    commit: str = Field(pattern=r"^[0-9a-f]{7,40}$")
    date: datetime = Field(strict=False)  # an ISO 8601 string in the file

    @model_validator(mode="after")
    def _zoned(self) -> Dated:
        if self.date.tzinfo is None:
            raise ValueError(f"date {self.date.isoformat()} has no time zone (write +00:00)")
        return self

    @property
    def stamp(self) -> str:
        """'52fbee0, 2026-11-30 00:46 UTC'."""
        return f"{self.commit[:7]}, {self.date:%Y-%m-%d %H:%M} UTC"


class ThresholdVersion(Dated):
    value: float


class TestVersion(Dated):
    test: Literal[
        "one_evaluation",
        "welch_evaluations",
        "paired_collapse",
        "instability",
        "paired",
        "welch_every_setting",
        "welch_per_pairing_pair",
    ]


class ReadingVersion(Dated):
    reading: Literal["fragile_mark", "within_one_se"]


class FamilyVersion(Dated):
    rule: Literal["none", "holm_read", "holm_fixed"]


class SeedPlan(Dated):
    grid: str
    pairings: Literal["all", "matched", "cross"] = "all"
    seeds: list[int] = Field(min_length=1)
    why: str


class ClaimRegistration(Dated):
    members: int = Field(ge=0)  # how many members of the family its cells are
    comparisons: str


class Registration(Strict):
    thresholds: dict[str, list[ThresholdVersion]]
    tests: dict[str, list[TestVersion]]
    readings: list[ReadingVersion] = Field(min_length=1)
    family: list[FamilyVersion] = Field(min_length=1)
    seeds: list[SeedPlan]
    claims: dict[str, ClaimRegistration]

    @model_validator(mode="after")
    def _histories(self) -> Registration:
        """Every history non-empty and in date order (its last version is the one in force)."""
        histories = {f"thresholds.{k}": v for k, v in self.thresholds.items()}
        histories |= {f"tests.{k}": v for k, v in self.tests.items()} | {"readings": self.readings}
        for name, versions in (histories | {"family": self.family}).items():
            if not versions:
                raise ValueError(f"{name} has no version")
            if [v.date for v in versions] != sorted(v.date for v in versions):
                raise ValueError(f"{name}: versions not in date order (the last is the one in force)")
        return self

    def values(self, first: bool = False) -> dict[str, float]:
        """Each threshold's value in force (`first`: as first registered)."""
        return {name: versions[0 if first else -1].value for name, versions in self.thresholds.items()}

    def test(self, rule: str, first: bool = False) -> TestVersion:
        return self.tests[rule][0 if first else -1]

    def reading(self, first: bool = False) -> ReadingVersion:
        return self.readings[0 if first else -1]

    def family_rule(self, first: bool = False) -> FamilyVersion:
        return self.family[0 if first else -1]

    def size(self) -> int:
        """The family's size fixed in advance: the members every claim names."""
        return sum(c.members for c in self.claims.values())

    def registered_seeds(self, grid: str, matched: bool, began: datetime | None) -> set[int] | None:
        """The seeds of `grid` on a pairing (matched or cross-pattern) that plans dated before `began` (the grid's
        first run) asked for; None where no plan names the grid (every seed then counts)."""
        plans = [p for p in self.seeds if p.grid == grid and p.pairings in ("all", "matched" if matched else "cross")]
        if not plans:
            return None
        return {seed for p in plans if began is None or p.date <= began for seed in p.seeds}

    def plans(self, grid: str) -> list[SeedPlan]:
        return [p for p in self.seeds if p.grid == grid]


def load_registration(experiments_dir: Path) -> Registration:
    """experiments/registration.yaml; a missing file or a bad key raises ConfigError naming the file and key."""
    path = experiments_dir / FILE
    if not path.exists():
        raise ConfigError(str(path), "(file)", "missing", "the claims page's registration (thresholds, tests, seeds)")
    try:
        return Registration.model_validate(read_yaml(path))
    except ValidationError as err:
        first = err.errors()[0]
        problem = first["msg"].removeprefix("Value error, ")
        raise ConfigError(str(path), ".".join(str(part) for part in first["loc"]), problem) from None

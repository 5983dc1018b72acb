"""The manifests under experiments/: models, pairings and suites, checked against each other.

models.yaml and suites.yaml have one section per profile; pairings.yaml is shared by
the profiles (a pairing names model labels, each profile says what a label is). A profile may lack a label
(tiny-long builds no I32): the pairings that name it have no runs in that profile (missing_pairing_models).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gropd.config.errors import ConfigError
from gropd.config.layering import read_yaml

MODES = ("default", "think", "nothink")
SHORT_REVISION = re.compile(r"^[0-9a-f]{7,40}$")


@dataclass(frozen=True)
class Manifests:
    """Parsed manifests. models/suites: profile -> key -> record; pairings: name -> record."""

    root: Path
    models: dict[str, dict[str, dict[str, Any]]]
    pairings: dict[str, dict[str, Any]]
    suites: dict[str, dict[str, dict[str, Any]]]

    @property
    def profiles(self) -> list[str]:
        return sorted(path.stem for path in (self.root / "profiles").glob("*.yaml"))

    def model(self, profile: str, label: str) -> dict[str, Any]:
        return self.models[profile][label]

    def missing_pairing_models(self, profile: str, pairing: str) -> list[str]:
        """The labels pairing `pairing` names that are not models of `profile` (empty: it can run there)."""
        sides = (self.pairings[pairing][role]["model"] for role in ("teacher", "student"))
        return [label for label in dict.fromkeys(sides) if label not in self.models.get(profile, {})]

    def lacks(self, profile: str, values: dict[str, Any]) -> bool:
        """Whether a run's grid values name a label `profile` has no model for: its `model`, or a model of its
        `pairing` (unknown names are not judged here: resolving the run reports them)."""
        if "model" in values:
            return values["model"] not in self.models.get(profile, {})
        return values.get("pairing") in self.pairings and bool(self.missing_pairing_models(profile, values["pairing"]))

    def require_profile(self, profile: str) -> None:
        """ConfigError naming --profile unless `profile` is one of profiles/*.yaml."""
        if profile not in self.profiles:
            raise ConfigError(
                "command line", "--profile", f"{profile!r} is not a profile", f"one of {', '.join(self.profiles)}"
            )


def load_manifests(root: Path = Path("experiments")) -> Manifests:
    """Read and cross-check models.yaml, pairings.yaml and suites.yaml under `root`."""
    models = read_yaml(root / "models.yaml")
    pairings = read_yaml(root / "pairings.yaml")
    suites = read_yaml(root / "suites.yaml")
    for profile, section in models.items():
        for label, record in _mapping(section, root / "models.yaml", profile).items():
            _check_model(record, root / "models.yaml", f"{profile}.{label}")
    for profile, section in suites.items():
        for key, record in _mapping(section, root / "suites.yaml", profile).items():
            _check_suite(record, root / "suites.yaml", f"{profile}.{key}")
    manifests = Manifests(root=root, models=models, pairings=pairings, suites=suites)
    for name, record in pairings.items():
        _check_pairing(manifests, name, record, root / "pairings.yaml")
    return manifests


def _mapping(value: Any, file: Path, key: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ConfigError(str(file), key, f"is {type(value).__name__}", "a mapping")
    return value


def _check_model(record: Any, file: Path, key: str) -> None:
    record = _mapping(record, file, key)
    source = _mapping(record.get("source"), file, f"{key}.source")
    if source.get("kind") == "hub":
        revision = source.get("revision")
        if not revision:
            raise ConfigError(str(file), f"{key}.source.revision", "missing", "a commit id (short or full)")
        if not SHORT_REVISION.match(str(revision)):
            raise ConfigError(
                str(file), f"{key}.source.revision", f"{revision!r} is not a commit id", "7-40 lowercase hex digits"
            )
    elif source.get("kind") not in ("tiny", "local"):
        raise ConfigError(str(file), f"{key}.source.kind", f"{source.get('kind')!r}", "one of hub, tiny, local")
    modes = record.get("modes")
    if not isinstance(modes, list) or not modes or any(mode not in MODES for mode in modes):
        raise ConfigError(str(file), f"{key}.modes", f"{modes!r}", f"a non-empty list of {', '.join(MODES)}")


def _check_suite(record: Any, file: Path, key: str) -> None:
    record = _mapping(record, file, key)
    k = record.get("k")
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ConfigError(str(file), f"{key}.k", f"{k!r}", "an integer K >= 1")


def _check_pairing(manifests: Manifests, name: str, record: Any, file: Path) -> None:
    record = _mapping(record, file, name)
    for role in ("teacher", "student"):
        side = _mapping(record.get(role), file, f"{name}.{role}")
        having = [section for section in manifests.models.values() if side.get("model") in section]
        if not having:
            raise ConfigError(
                str(file),
                f"{name}.{role}.model",
                f"{side.get('model')!r} is not a model of any profile",
                f"one of {', '.join(sorted({label for section in manifests.models.values() for label in section}))}",
            )
        for section in having:  # a profile without the model has no runs of this pairing (pairing_models)
            modes = section[side["model"]]["modes"]
            if side.get("mode") not in modes:
                raise ConfigError(
                    str(file),
                    f"{name}.{role}.mode",
                    f"{side.get('mode')!r} is not a mode of {side['model']}",
                    f"one of {', '.join(modes)}",
                )
    if record.get("teacher_render", "own") not in ("own", "student"):
        raise ConfigError(str(file), f"{name}.teacher_render", f"{record.get('teacher_render')!r}", "own or student")
    for profile, values in _mapping(record.get("config", {}), file, f"{name}.config").items():
        if profile not in manifests.models:
            raise ConfigError(
                str(file), f"{name}.config.{profile}", "not a profile", f"one of {', '.join(manifests.models)}"
            )
        _mapping(values, file, f"{name}.config.{profile}")

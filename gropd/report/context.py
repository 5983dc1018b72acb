"""What every artefact builder receives: the profile, where to read, where to write, the settings."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gropd.config.layering import merge, read_yaml
from gropd.report.settings import ReportSettings


@dataclass(frozen=True)
class ReportContext:
    """Inputs of one report build. Results are read from `results_root/<profile>/<run_id>/`."""

    profile: str
    results_root: Path
    experiments_dir: Path
    out_dir: Path
    settings: ReportSettings

    @property
    def profile_results(self) -> Path:
        return self.results_root / self.profile

    def manifest(self, name: str) -> dict[str, Any]:
        """experiments/<name>.yaml, whole."""
        return read_yaml(self.experiments_dir / f"{name}.yaml")

    def section(self, name: str) -> dict[str, Any]:
        """This profile's section of a per-profile manifest (models, suites); {} when absent."""
        return self.manifest(name).get(self.profile) or {}

    def train_defaults(self) -> dict[str, Any]:
        """train.yaml with the profile layered on top: the values a run gets unless its grid sets them."""
        config = read_yaml(self.experiments_dir / "train.yaml")
        profile = read_yaml(self.experiments_dir / "profiles" / f"{self.profile}.yaml")
        profile.pop("profile", None)
        merge(config, profile, f"profiles/{self.profile}.yaml", {})
        return config

    def manifest_files(self, *names: str) -> list[Path]:
        """The manifest paths an artefact was built from (for its provenance sidecar)."""
        return [self.experiments_dir / name for name in names]

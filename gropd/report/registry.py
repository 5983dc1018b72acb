"""The artefacts by name and `build`, which writes the chosen ones to out_root/<profile>/."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from gropd.report.claims import claims
from gropd.report.context import ReportContext
from gropd.report.figure1 import fig1
from gropd.report.figure3 import fig3
from gropd.report.figure4 import fig4
from gropd.report.manifest_tables import table3, table4, table5
from gropd.report.settings import load_settings
from gropd.report.table1 import table1
from gropd.report.table2 import table2
from gropd.report.table6 import table6

ARTEFACTS: dict[str, Callable[[ReportContext], list[Path]]] = {
    "table1": table1,
    "table2": table2,
    "fig1": fig1,
    "fig3": fig3,
    "fig4": fig4,
    "table3": table3,
    "table4": table4,
    "table5": table5,
    "table6": table6,
    "claims": claims,
}


def build(
    names: list[str],
    *,
    profile: str,
    results_root: Path = Path("results"),
    experiments_dir: Path = Path("experiments"),
    out_root: Path = Path("paper_figures"),
) -> list[Path]:
    """Build the named artefacts from results/ and experiments/ only; returns every file written.

    Unknown artefact or profile names raise ValueError listing the valid ones. Reads only: it never
    trains or evaluates."""
    unknown = [name for name in names if name not in ARTEFACTS]
    if unknown:
        raise ValueError(f"unknown artefact(s) {', '.join(unknown)}; valid: {', '.join(ARTEFACTS)}")
    profiles = sorted(path.stem for path in (experiments_dir / "profiles").glob("*.yaml"))
    if profile not in profiles:
        raise ValueError(f"unknown profile {profile!r}; valid: {', '.join(profiles)}")
    ctx = ReportContext(
        profile=profile,
        results_root=results_root,
        experiments_dir=experiments_dir,
        out_dir=out_root / profile,
        settings=load_settings(experiments_dir / "report.yaml"),
    )
    return [path for name in names for path in ARTEFACTS[name](ctx)]

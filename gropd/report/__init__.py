"""Reports: Tables 1–6, Figures 1(b–d), 3 and 4 and the claims page, rebuilt from results/ and experiments/ alone.

    evidence.py   results/ read once: settings × seeds, each seed's numbers or the reason it has none
    stats.py      the statistics convention every artefact states (mean ± sample std, n; paired t intervals,
                  Welch's across pairings, Holm)
    tables.py     Tables 1–6          figures.py  Figures 1, 3, 4        claims.py  the claims page
    verdicts.py   the claims' rules   formats.py  Markdown, LaTeX, CSV   publish.py  all-or-nothing writing
    settings.py   experiments/report.yaml                                page.py     index.html
    families.py   the claims page's comparisons: registered (Holm-adjusted) and described
    rules.py      the claims' rules (a Section of cells)   registration.py  experiments/registration.yaml
    registered.py what the registration says of a claim: set after the runs, claims.json's seed counts

`build(["table1", "fig3"], profile="tiny")` writes paper_figures/tiny/table1.{md,tex,csv}, fig3a.{png,pdf}, …
and index.html, the page of the artefacts of that build (artefact `index`: every build has one, showing what it
built), each artefact with a `<artefact>.provenance.json` sidecar, or nothing at all when any of them fails.
"""

from __future__ import annotations

from pathlib import Path

from gropd.artefacts import ARTEFACT_NAMES
from gropd.config import ConfigError
from gropd.report.claims import claims
from gropd.report.evidence import Evidence
from gropd.report.figures import fig1, fig3, fig4
from gropd.report.page import index
from gropd.report.publish import publish
from gropd.report.settings import load_settings
from gropd.report.tables import table1, table2, table3, table4, table5, table6

BUILDERS = {f.__name__: f for f in (table1, table2, fig1, fig3, fig4, table3, table4, table5, table6, claims)}
ARTEFACTS = {name: BUILDERS[name] for name in ARTEFACT_NAMES}  # (tests/test_rough_inputs.py: the same names)


def build(
    names: list[str],
    *,
    profile: str,
    results_root: Path = Path("results"),
    experiments_dir: Path = Path("experiments"),
    out_root: Path = Path("paper_figures"),
) -> list[Path]:
    """Build the named artefacts from results/<profile>/ and experiments/, and the index page of them, then write
    them all into out_root/<profile>/; returns every file written. Bad input (an unknown name or profile, a broken
    run file, an artefact with no finished run) raises before anything is written."""
    unknown = [name for name in names if name not in ARTEFACTS]
    if unknown:
        raise ConfigError(
            "command line", "report", f"unknown artefact {', '.join(unknown)}", f"one of {', '.join(ARTEFACTS)}"
        )
    profiles = sorted(path.stem for path in (experiments_dir / "profiles").glob("*.yaml"))
    if profile not in profiles:
        raise ConfigError("command line", "--profile", f"{profile!r} is not a profile", f"one of {', '.join(profiles)}")
    ev = Evidence(profile, results_root, experiments_dir, load_settings(experiments_dir / "report.yaml"))
    artefacts = [ARTEFACTS[name](ev) for name in names]
    return publish(ev, [*artefacts, index(ev, artefacts)], out_root / profile)


__all__ = ["ARTEFACTS", "build"]

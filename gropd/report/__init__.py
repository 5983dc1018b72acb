"""Reports: Tables 1–6 and Figures 1, 3 and 4 rebuilt from results/ and the manifests alone.

`build(["table1", "fig3"], profile="tiny")` writes paper_figures/tiny/table1.{md,tex,csv},
fig3a.{png,pdf}, … each with a `<artefact>.provenance.json` sidecar.
"""

from gropd.report.context import ReportContext
from gropd.report.registry import ARTEFACTS, build

__all__ = ["ARTEFACTS", "ReportContext", "build"]

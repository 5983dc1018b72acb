"""The artefacts `report` builds, by name, in the order a build lists them: named here, outside gropd.report and
apart from their builders, so the command line (its help, and every process it starts: trainer ranks, evaluation
shards) lists them without loading the report package (matplotlib, its figures and tables)."""

from __future__ import annotations

ARTEFACT_NAMES = ("table1", "table2", "fig1", "fig3", "fig4", "table3", "table4", "table5", "table6", "claims")

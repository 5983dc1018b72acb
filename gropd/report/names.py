"""The artefacts `report` builds, by name, in the order a build lists them: named here, apart from their builders,
so the command line's help lists them without loading the report machinery (matplotlib, numpy)."""

from __future__ import annotations

ARTEFACT_NAMES = ("table1", "table2", "fig1", "fig3", "fig4", "table3", "table4", "table5", "table6", "claims")

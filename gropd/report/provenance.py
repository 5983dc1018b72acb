"""Publishing an artefact: its table (md, tex, csv) or figures (png, pdf, md), then the
`<artefact>.provenance.json` sidecar: what it was built from, when, and what was missing."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from eval.files import atomic_write_json
from gropd.report.context import ReportContext
from gropd.report.formats import Table, write_table
from gropd.report.loading import GridRun
from gropd.report.plotting import FigureSet, save_figure, write_figure_markdown


def file_digest(path: Path) -> str | None:
    """sha256 of a file's bytes (first 16 hex digits), None when it does not exist."""
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16] if path.exists() else None


def write_provenance(
    ctx: ReportContext,
    name: str,
    *,
    runs: list[GridRun],
    manifests: list[Path],
    outputs: list[Path],
    missing: list[str],
) -> Path:
    """Write out_dir/<name>.provenance.json: profile, UTC build time, runs (id, config hash, state),
    manifest digests, report settings, the outputs written and the missing cells/runs with reasons."""
    record: dict[str, Any] = {
        "artefact": name,
        "profile": ctx.profile,
        "built": datetime.now(UTC).isoformat(timespec="seconds"),
        "results_root": str(ctx.results_root),
        "runs": [
            {
                "run_id": run.run_id,
                "state": run.state,
                "config_hash": (run.status or {}).get("config_hash"),
                "updated": (run.status or {}).get("updated"),
            }
            for run in runs
        ],
        "manifests": {str(path): file_digest(path) for path in manifests},
        "settings": ctx.settings.model_dump(mode="json", exclude={"paper_reference"}),
        "outputs": [path.name for path in outputs],
        "missing": missing,
    }
    path = ctx.out_dir / f"{name}.provenance.json"
    atomic_write_json(path, record)
    return path


def publish_table(
    ctx: ReportContext, table: Table, runs: list[GridRun], manifests: list[str], missing: list[str] | None = None
) -> list[Path]:
    """Write <name>.{md,tex,csv} and the sidecar naming `manifests` (paths under experiments/) and
    `missing` (default: the table's own missing list); returns every path written."""
    paths = write_table(table, ctx.out_dir)
    sidecar = write_provenance(
        ctx,
        table.name,
        runs=runs,
        manifests=ctx.manifest_files(*manifests),
        outputs=paths,
        missing=table.missing if missing is None else missing,
    )
    return [*paths, sidecar]


def publish_figures(
    ctx: ReportContext, name: str, title: str, caption: str, figures: FigureSet, manifests: list[str]
) -> list[Path]:
    """Write each figure as <stem>.{png,pdf}, <name>.md (title, caption, the PNGs, the missing runs) and
    the sidecar; returns every path written."""
    paths = [path for stem, fig in figures.figures.items() for path in save_figure(fig, ctx.out_dir, stem)]
    paths.append(write_figure_markdown(ctx.out_dir, name, title, caption, list(figures.figures), figures.missing))
    sidecar = write_provenance(
        ctx, name, runs=figures.runs, manifests=ctx.manifest_files(*manifests), outputs=paths, missing=figures.missing
    )
    return [*paths, sidecar]

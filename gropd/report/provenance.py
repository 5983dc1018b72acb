"""The `<artefact>.provenance.json` sidecar: what an artefact was built from, when, and what was missing."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from eval.files import atomic_write_json
from gropd.report.context import ReportContext
from gropd.report.loading import GridRun


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

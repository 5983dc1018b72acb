"""Publishing: every artefact of a build is made in memory first, then written into place, so a failure
(a broken run file, an artefact without results) leaves paper_figures/ as it was. Each artefact gets a
`<name>.provenance.json` sidecar: the results directory, the runs read (id, state, config hash), the
manifests' digests, the settings, the files and the same Missing lines the artefact shows."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from eval.files import atomic_write_with
from gropd.config.errors import ConfigError
from gropd.record.run_dir import DONE
from gropd.report.evidence import Evidence, Run

RECORDED = ("config_hash", "updated")  # what the sidecar records of each run's status.json


@dataclass
class Artefact:
    """What one builder made: files (name -> text or bytes), the runs it read, its Missing lines, the
    manifests (paths under experiments/), the grids it needs a finished run of (none: manifests only) and
    what its files render (a Table, a Drawing, the Claims), which the index page renders too."""

    name: str
    files: dict[str, str | bytes]
    runs: list[Run] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    manifests: list[str] = field(default_factory=list)
    grids: tuple[str, ...] = ()
    content: object = None


def require_results(ev: Evidence, artefact: Artefact) -> None:
    """ConfigError (exit 2) when none of the artefact's grids has a finished or collapsed run: an empty
    table never replaces a built one."""
    if not artefact.grids or any(run.state in DONE for grid in artefact.grids for run in ev.runs(grid)):
        return
    root, where, target = ev.results_root, ev.profile_results, "all" if artefact.name == "claims" else artefact.name
    problem = f"no finished run of grid {', '.join(artefact.grids)} in {where}"
    problem = f"{root} is a file" if root.is_file() else f"{where} does not exist" if not where.is_dir() else problem
    expected = f"finished runs: run `./reproduce.sh {target} --profile {ev.profile}`, or read committed ones with "
    raise ConfigError(
        str(root if root.is_file() else where),
        "--results",
        f"{problem}: {artefact.name} has nothing to show; nothing was written",
        expected + "`--results results/reference`",
    )


def provenance(ev: Evidence, artefact: Artefact) -> str:
    """The sidecar's JSON text."""

    paths = [ev.experiments_dir / name for name in artefact.manifests]
    runs = {run.run_id: run for run in artefact.runs}.values()
    record = {
        "artefact": artefact.name,
        "profile": ev.profile,
        "built": datetime.now(UTC).isoformat(timespec="seconds"),
        "results_root": str(ev.results_root),
        "runs": [{"run_id": r.run_id, "state": r.state} | {k: (r.status or {}).get(k) for k in RECORDED} for r in runs],
        "manifests": {str(p): hashlib.sha256(p.read_bytes()).hexdigest()[:16] if p.exists() else None for p in paths},
        "settings": ev.report.model_dump(mode="json", exclude={"paper_reference", "claims", "rules"}),
        "outputs": list(artefact.files),
        "missing": artefact.missing,
    }
    return json.dumps(record, indent=2, sort_keys=True) + "\n"


def publish(ev: Evidence, artefacts: list[Artefact], out_dir: Path) -> list[Path]:
    """Check every artefact has results, then write every file (each atomically); returns the paths."""
    for artefact in artefacts:
        require_results(ev, artefact)
    files = {name: data for a in artefacts for name, data in a.files.items()}
    files |= {f"{a.name}.provenance.json": provenance(ev, a) for a in artefacts}
    for name, data in files.items():
        raw = data if isinstance(data, bytes) else data.encode()
        atomic_write_with(out_dir / name, lambda tmp, raw=raw: Path(tmp).write_bytes(raw))
    return [out_dir / name for name in files]

"""One run's directory under results/<profile>/<run_id>/ (layout in results/README.md).

status.json is rewritten atomically; metrics.jsonl is appended one line per rollout batch
and, on resume, cut back to the last checkpointed step so each step appears exactly once.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from gropd.atomic import atomic_write_json, atomic_write_text


class RunDir:
    def __init__(self, root: Path):
        self.root = root
        self.config_path = root / "config.yaml"
        self.status_path = root / "status.json"
        self.metrics_path = root / "metrics.jsonl"
        self.checkpoints = root / "checkpoints"
        self.final = root / "final"
        self.eval_dir = root / "eval"

    def read_status(self) -> dict[str, Any] | None:
        return json.loads(self.status_path.read_text()) if self.status_path.exists() else None

    def update_status(self, **fields: Any) -> dict[str, Any]:
        """Merge `fields` into status.json (atomically) and return the new status."""
        status = {**(self.read_status() or {}), **fields, "updated": time.strftime("%Y-%m-%dT%H:%M:%S")}
        atomic_write_json(self.status_path, status)
        return status

    def write_config(self, config_yaml: str) -> None:
        atomic_write_text(self.config_path, config_yaml)

    def read_metrics(self) -> list[dict[str, Any]]:
        """All complete metric lines (a torn last line from a crash is ignored)."""
        if not self.metrics_path.exists():
            return []
        records = []
        for line in self.metrics_path.read_text().splitlines():
            try:
                records.append(json.loads(line))
            except json.JSONDecodeError:
                break
        return records

    def append_metrics(self, record: dict[str, Any]) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        with self.metrics_path.open("a") as handle:
            handle.write(json.dumps(record, sort_keys=True) + "\n")
            handle.flush()
            os.fsync(handle.fileno())

    def truncate_metrics(self, last_step: int) -> list[dict[str, Any]]:
        """Keep only the records of steps 1..last_step; returns them."""
        kept = [record for record in self.read_metrics() if record["step"] <= last_step]
        atomic_write_text(self.metrics_path, "".join(json.dumps(r, sort_keys=True) + "\n" for r in kept))
        return kept

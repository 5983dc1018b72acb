"""A model file is read once a run, not once a process (gropd/model/checkpoints.py stamps): the evaluation's or a
resume's process reuses the digest its run recorded for a file whose stamp is unchanged, and reads a file whose
stamp changed (a rewritten byte is still caught: tests/test_run_identity.py)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import yaml

from gropd.config import load_manifests
from gropd.model import checkpoints
from gropd.model.checkpoints import checkpoint_digests, checkpoint_stamps


def test_a_later_process_reads_only_the_files_whose_stamp_changed(
    experiments: Path, tmp_path: Path, monkeypatch
) -> None:
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"weights" * 1000)
    models = yaml.safe_load((experiments / "models.yaml").read_text())
    models["tiny"]["I1.7"] = {**models["tiny"]["I1.7"], "source": {"kind": "local", "path": str(model)}}
    (experiments / "models.yaml").write_text(yaml.safe_dump(models))
    manifests = load_manifests(experiments)

    stamps = checkpoint_stamps(manifests, "tiny", "I1.7")
    digests = checkpoint_digests(manifests, "tiny", "I1.7")
    assert digests["model.safetensors"] == hashlib.sha256(b"weights" * 1000).hexdigest()
    read: list[str] = []
    monkeypatch.setattr(checkpoints, "file_sha256", lambda path: read.append(path.name) or "read again")
    assert checkpoint_digests(manifests, "tiny", "I1.7", (digests, stamps)) == digests and read == []  # before: both
    (model / "model.safetensors").write_bytes(b"weightz" * 1000)  # the same size, written again
    again = checkpoint_digests(manifests, "tiny", "I1.7", (digests, stamps))
    assert read == ["model.safetensors"] and again["model.safetensors"] == "read again"
    assert again["config.json"] == digests["config.json"]
    assert checkpoint_digests(manifests, "tiny", "I1.7", (digests, None)) is not None and len(read) == 3  # no stamps

"""Checks before a run loads anything (gropd/runs/preflight.py): the 32B teacher served by default in the
paper profile, a served teacher without an address stopped at once (exit 2), its address outside the
config hash, and the fit check on the run's own engines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from gropd.cli import main
from gropd.config import ConfigError, config_hash, load_manifests
from gropd.config.resolve import resolve_run
from gropd.model.fit import FitError
from gropd.runs.preflight import require_fits, require_teacher_server

H100 = 81559 * 2**20


def write_fake_lock(experiments: Path) -> None:
    """A lock with made-up full revisions for every paper model and dataset (no network)."""
    from gropd.config.lock import pin

    pin(
        load_manifests(experiments),
        "paper",
        experiments / "lock.yaml",
        resolver=lambda kind, repo, rev: (rev + "0" * 40)[:40] if kind == "model" else "f" * 40,
    )


def config(experiments: Path, profile: str, pairing: str, *overrides: str):
    values = {"kind": "train", "grid": "table1", "pairing": pairing, "method": "opd", "run_id": f"t__{pairing}"}
    return resolve_run(None, profile, load_manifests(experiments), list(overrides), entry_values=values)


def test_the_32b_pairings_score_through_a_server_in_the_paper_profile_only(experiments: Path) -> None:
    write_fake_lock(experiments)
    for pairing in ("I32nothink-I1.7nothink", "I32think-B1.7"):
        assert config(experiments, "paper", pairing).backend.teacher == "server"
        assert config(experiments, "tiny", pairing).backend.teacher == "hf"
    assert config(experiments, "paper", "I4nothink-I1.7nothink").backend.teacher == "vllm"
    # a later layer still wins over the pairing's default
    assert config(experiments, "paper", "I32think-B1.7", "backend.teacher=vllm").backend.teacher == "vllm"


def test_a_served_teacher_without_an_address_stops_before_anything_loads(
    experiments: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    write_fake_lock(experiments)
    with pytest.raises(ConfigError, match=r"backend.teacher_url: missing.*teacher_server.sh I32"):
        require_teacher_server(config(experiments, "paper", "I32nothink-I1.7nothink"), load_manifests(experiments))
    monkeypatch.chdir(experiments.parent)
    code = main(["run", "table1__I32nothink-I1.7nothink__gropd", "--profile", "paper"])
    assert code == 2 and "TEACHER_URL" in capsys.readouterr().err
    assert not (experiments.parent / "results").exists()  # nothing loaded, nothing written


def test_the_teacher_address_is_not_part_of_the_run(experiments: Path) -> None:
    write_fake_lock(experiments)
    here = config(experiments, "paper", "I32think-B1.7", "backend.teacher_url=http://a:8000")
    there = config(experiments, "paper", "I32think-B1.7", "backend.teacher_url=http://b:9000")
    assert config_hash(here) == config_hash(there)
    assert config_hash(here) != config_hash(config(experiments, "paper", "I32think-B1.7", "backend.dtype=float32"))


def test_fit_check_reads_the_runs_own_models(experiments: Path, tmp_path: Path, monkeypatch) -> None:
    """An in-process 32B teacher on an 80 GB training GPU is refused before loading, naming the way out;
    the model's numbers come from its config.json (here a local checkpoint directory)."""
    shapes = {  # config.json numbers of Qwen/Qwen3-32B and Qwen/Qwen3-1.7B
        "I32": {
            "hidden_size": 5120,
            "num_hidden_layers": 64,
            "intermediate_size": 25600,
            "num_attention_heads": 64,
            "tie_word_embeddings": False,
        },
        "I1.7": {
            "hidden_size": 2048,
            "num_hidden_layers": 28,
            "intermediate_size": 6144,
            "num_attention_heads": 16,
            "tie_word_embeddings": True,
        },
    }
    models = yaml.safe_load((experiments / "models.yaml").read_text())
    for label, shape in shapes.items():
        model_dir = tmp_path / label
        model_dir.mkdir()
        (model_dir / "config.json").write_text(
            json.dumps(
                {
                    "model_type": "qwen3",
                    "architectures": ["Qwen3ForCausalLM"],
                    "vocab_size": 151936,
                    "num_key_value_heads": 8,
                    "head_dim": 128,
                    **shape,
                }
            )
        )
        models["paper"][label]["source"] = {"kind": "local", "path": str(model_dir)}
    (experiments / "models.yaml").write_text(yaml.safe_dump(models))
    run = config(experiments, "paper", "I32nothink-I1.7nothink", "backend.teacher=vllm")
    with pytest.raises(FitError, match=r"in-process teacher engine .* does not fit.*backend.teacher: server"):
        require_fits(run, load_manifests(experiments), H100)

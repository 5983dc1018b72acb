"""Checks before a run loads anything (gropd/runs/preflight.py): the 32B teacher served by default in the
paper profile, a served teacher found through its address file when no address is given, its address outside
the config hash, and the fit check on the run's own engines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from gropd.cli import main
from gropd.config import config_hash, load_manifests
from gropd.config.resolve import resolve_run
from gropd.model.fit import FitError
from gropd.runs.preflight import require_fits, require_one_gpu_engines

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


def test_a_served_teacher_without_an_address_follows_its_address_file(experiments: Path) -> None:
    """Runs learn where the server is from the file its launch script writes (and rewrites when it moves), not
    only from an address given at submission; an explicit backend.teacher_url stays a fixed address."""
    from gropd.model.components import pairing_roles
    from gropd.model.teacher.server import teacher_address

    write_fake_lock(experiments)
    run = config(experiments, "paper", "I32nothink-I1.7nothink")
    label = pairing_roles(run, load_manifests(experiments))[1].label
    assert run.backend.teacher_url is None and label == "I32"
    assert teacher_address(None, label, {}).file == Path(".teachers/I32.url")
    assert teacher_address(None, label, {"GROPD_TEACHER_DIR": "/shared/t"}).file == Path("/shared/t/I32.url")
    fixed = teacher_address("http://a:8000/", label, {"GROPD_TEACHER_DIR": "/shared/t"})
    assert fixed.current() == "http://a:8000" and fixed.file is None


def test_the_teacher_address_is_not_part_of_the_run(experiments: Path) -> None:
    write_fake_lock(experiments)
    here = config(experiments, "paper", "I32think-B1.7", "backend.teacher_url=http://a:8000")
    there = config(experiments, "paper", "I32think-B1.7", "backend.teacher_url=http://b:9000")
    assert config_hash(here) == config_hash(there)
    assert config_hash(here) != config_hash(config(experiments, "paper", "I32think-B1.7", "backend.dtype=float32"))


SHAPES = {  # config.json numbers of Qwen/Qwen3-32B, Qwen/Qwen3-4B and Qwen/Qwen3-1.7B (and their -Base)
    "I32": {
        "hidden_size": 5120,
        "num_hidden_layers": 64,
        "intermediate_size": 25600,
        "num_attention_heads": 64,
        "tie_word_embeddings": False,
    },
    "I4": {
        "hidden_size": 2560,
        "num_hidden_layers": 36,
        "intermediate_size": 9728,
        "num_attention_heads": 32,
        "tie_word_embeddings": True,
    },
    "I1.7": {
        "hidden_size": 2048,
        "num_hidden_layers": 28,
        "intermediate_size": 6144,
        "num_attention_heads": 16,
        "tie_word_embeddings": True,
    },
}
SHAPES |= {"B4": SHAPES["I4"], "B1.7": SHAPES["I1.7"]}  # the Base checkpoints share their shapes


def local_shapes(experiments: Path, tmp_path: Path) -> None:
    """The paper models as local directories holding only their config.json (no weights, no network)."""
    models = yaml.safe_load((experiments / "models.yaml").read_text())
    for label, shape in SHAPES.items():
        model_dir = tmp_path / label
        model_dir.mkdir()
        config_json = {
            "model_type": "qwen3",
            "architectures": ["Qwen3ForCausalLM"],
            "vocab_size": 151936,
            "num_key_value_heads": 8,
            "head_dim": 128,
            **shape,
        }
        (model_dir / "config.json").write_text(json.dumps(config_json))
        models["paper"][label]["source"] = {"kind": "local", "path": str(model_dir)}
    (experiments / "models.yaml").write_text(yaml.safe_dump(models))


def test_fit_check_reads_the_runs_own_models(experiments: Path, tmp_path: Path) -> None:
    """An in-process 32B teacher on an 80 GB training GPU is refused before loading, naming the way out (never
    tensor parallelism, which in-process engines cannot use); the numbers come from the model's config.json."""
    local_shapes(experiments, tmp_path)
    run = config(experiments, "paper", "I32nothink-I1.7nothink", "backend.teacher=vllm")
    with pytest.raises(FitError, match=r"in-process teacher engine .* does not fit.*backend.teacher: server") as err:
        require_fits(run, load_manifests(experiments), H100, world=8, fsdp=True)
    assert "backend.tensor_parallel" not in str(err.value)
    squeezed = config(experiments, "paper", "I4nothink-I1.7nothink", "backend.eval_gpu_fraction=0.05")
    with pytest.raises(FitError, match=r"evaluation engine .* does not fit") as err:
        require_fits(squeezed, load_manifests(experiments), H100, world=8, fsdp=True)
    assert "backend.tensor_parallel" not in str(err.value)


def on_a_gpu(monkeypatch: pytest.MonkeyPatch, total: int) -> None:
    """torch as on a node whose GPUs have `total` bytes (nothing else of CUDA is touched before the refusal)."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda index: type("P", (), {"total_memory": total}))


def test_the_single_process_gpu_route_is_refused_before_anything_loads(
    experiments: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """`./reproduce.sh table1` (or --jobs 8) on a GPU node trains in one process per GPU: 25.6 GiB of float32
    masters, gradients and AdamW + autocast copies + activations beside two engines at 0.3 of an 80 GB card do
    not fit: exit 2 naming the FSDP launch. Under FSDP over 8 processes it fits."""
    write_fake_lock(experiments)
    local_shapes(experiments, tmp_path)
    monkeypatch.chdir(experiments.parent)
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    on_a_gpu(monkeypatch, H100)
    code = main(["grid", "table1", "--profile", "paper", "--jobs", "8"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert "one process, unsharded" in err and "float32 weights, gradients and AdamW 25.6" in err
    assert "accelerate launch --config_file experiments/launch/eight_gpu_fsdp.yaml" in err
    assert not (experiments.parent / "results").exists()  # nothing loaded, nothing written
    run = config(experiments, "paper", "I4nothink-I1.7nothink")
    require_fits(run, load_manifests(experiments), H100, world=8, fsdp=True)


def test_each_pairing_splits_its_gpu_as_fit_chooses(
    experiments: Path, tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    """Table 3 on 8 GPUs: 8 prompts x G = 8 per rank, each up to 10,240 tokens (112 KiB of KV a token). The old
    0.3 rollout share of an H100 held 17 of a rank's 64 at full length (4 waves) while ~22 GiB idled; fit.py's
    split, taken for the card the job got (with_gpu_split; the paper profile types none), gives the rollout engine
    what the trainer and the teacher leave: 0.5 beside an in-process 4B teacher at 0.2 (31 at once: 3 waves), 0.7
    beside a served 32B (46: 2 waves)."""
    from gropd.model.fit import GIB, PLANNED_GPU_BYTES
    from gropd.runs.preflight import engines_of, memory_split, with_gpu_split

    local_shapes(experiments, tmp_path)
    manifests = load_manifests(experiments)
    assert PLANNED_GPU_BYTES == H100

    def at_once(fraction: float) -> int:  # Qwen3-1.7B: 3.2 GiB of bf16 weights; float32 logits of its 64 rows + 2 GiB
        return int((fraction * H100 - 1_720_574_976 * 2 - (64 * 151936 * 4 + 2 * GIB)) // (10240 * 114688))

    assert (at_once(0.3), at_once(0.5), at_once(0.7)) == (17, 31, 46)
    old = config(experiments, "paper", "I4nothink-I1.7nothink", "backend.rollout_gpu_fraction=0.3")
    require_fits(old, manifests, H100, world=8, fsdp=True)
    err = capsys.readouterr().err
    assert "rollout engine holds the KV cache of 17 of its 64 sequences of 10240 tokens" in err and "4 waves" in err
    assert "this run has backend.rollout_gpu_fraction=0.3 and backend.teacher_gpu_fraction=0.2 (4 wave(s))" in err
    assert "backend.rollout_gpu_fraction=0.50 backend.teacher_gpu_fraction=0.20 gives the split" in err
    expected = {"I4nothink-I1.7nothink": (0.5, 0.2, 31), "I4think-B1.7": (0.5, 0.2, 31), "B4-B1.7": (0.5, 0.2, 31)}
    expected |= {"I32nothink-I1.7nothink": (0.7, 0.0, 46), "I32think-B1.7": (0.7, 0.0, 46)}
    for pairing, (rollout, teacher, held) in expected.items():
        run = config(experiments, "paper", pairing)
        engines = [e for e in engines_of(run, manifests, 8) if e.what != "evaluation engine"]
        split = memory_split(run, manifests, H100, engines, shards=8, fsdp=True)
        assert (split.rollout, split.teacher, split.rollout_fit.at_once()) == (rollout, teacher, held), pairing
        assert (run.backend.rollout_gpu_fraction, run.backend.teacher_gpu_fraction) == (None, None)  # the card's
        job = with_gpu_split(run, manifests, H100, 8, True).backend  # what a job on an H100 takes
        assert (job.rollout_gpu_fraction, job.teacher_gpu_fraction) == (rollout, teacher or None), pairing
        require_fits(run, manifests, H100, world=8, fsdp=True)
        err = capsys.readouterr().err
        assert f"holds {held} of its 64 sequences at full length at once ({-(-64 // held)} wave(s)" in err, err
        assert "this run has" not in err and "wave(s)) when" not in err


def test_tensor_parallel_engines_in_the_trainers_processes_are_refused(
    experiments: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """external_launcher needs identical prompts across a tensor-parallel group; each rank has its own share."""
    write_fake_lock(experiments)
    monkeypatch.chdir(experiments.parent)
    code = main(["run", "table1__I4nothink-I1.7nothink__gropd", "--profile", "paper", "backend.tensor_parallel=2"])
    err = capsys.readouterr().err
    assert code == 2 and "backend.tensor_parallel: 2 with in-process vLLM engines" in err, err
    assert "teacher_server.sh LABEL TP" in err
    assert not (experiments.parent / "results").exists()
    for allowed in ("backend.rollout=hf backend.teacher=server backend.teacher_url=http://a:1",):
        require_one_gpu_engines(
            config(experiments, "paper", "I32nothink-I1.7nothink", *allowed.split(), "backend.tensor_parallel=2")
        )

"""Where a model label's weights come from in a profile, and loading them.

hub: the repo at the full revision from experiments/lock.yaml (paper runs refuse unpinned
models); tiny: the suite's own tiny world (built on first use) of the recipe the source's `world` names
(experiments/<world>; default tiny_world.yaml, world 4); local: a directory.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fileio import file_sha256, files_under
from gropd.config.errors import ConfigError
from gropd.config.lock import pinned_revision, read_lock
from gropd.config.manifests import Manifests

if TYPE_CHECKING:  # torch is imported by the functions that load weights: a run's identity is read without it
    import torch

DTYPE_NAMES = ("float32", "bfloat16", "float16")


def torch_dtype(name: str) -> torch.dtype:
    """The torch dtype `name` (one of DTYPE_NAMES, as `backend.dtype` spells it)."""
    import torch

    if name not in DTYPE_NAMES:
        raise ValueError(f"unknown dtype {name!r}; valid: {', '.join(DTYPE_NAMES)}")
    return getattr(torch, name)


@dataclass(frozen=True)
class CheckpointRef:
    """A loadable checkpoint: a Hub repo or a local directory, and the exact revision."""

    path: str
    revision: str | None
    tokenizer_path: str

    def describe(self) -> str:
        return f"{self.path}@{self.revision}" if self.revision else self.path


TINY_RECIPE = "tiny_world.yaml"  # a tiny source's recipe when it names no `world` (world 4's)


def tiny_recipe_path(manifests: Manifests, source: dict[str, Any]) -> Path:
    """The recipe of a tiny model source: experiments/<its `world`>, tiny_world.yaml when it names none."""
    return manifests.root / str(source.get("world", TINY_RECIPE))


def checkpoint_ref(manifests: Manifests, profile: str, label: str) -> CheckpointRef:
    """Resolve a model label of `profile` to a loadable reference."""
    source = manifests.model(profile, label)["source"]
    if source["kind"] == "hub":
        lock_path = manifests.root / "lock.yaml"
        full = pinned_revision(read_lock(lock_path), source["repo"], str(source["revision"]), lock_path)
        return CheckpointRef(path=source["repo"], revision=full, tokenizer_path=source["repo"])
    if source["kind"] == "tiny":
        from gropd.tiny.world import ensure_tiny_world

        world = ensure_tiny_world(tiny_recipe_path(manifests, source))
        return CheckpointRef(str(world.model_dir(source["label"])), None, str(world.tokenizer_dir))
    return CheckpointRef(path=str(source["path"]), revision=None, tokenizer_path=str(source["path"]))


def checkpoint_identity(manifests: Manifests, profile: str, label: str) -> str:
    """What decides model `label`'s weights, without loading or building anything: the Hub repo at its
    locked full revision ("unpinned" before `pin`), the tiny model's own recipe hash (label_hash: an edit
    to another model of the tiny world leaves it alone), or the local path.
    A run records it; a run whose models' identities changed since it started is not resumed."""
    source = manifests.model(profile, label)["source"]
    if source["kind"] == "hub":
        entry = (read_lock(manifests.root / "lock.yaml").get("models") or {}).get(source["repo"]) or {}
        return f"{source['repo']}@{entry.get('full', 'unpinned')}"
    if source["kind"] == "tiny":
        from gropd.tiny.recipe import label_hash, load_recipe

        recipe, _ = load_recipe(tiny_recipe_path(manifests, source))
        return f"tiny {source['label']} {label_hash(recipe, source['label'])[:12]}"
    return str(source["path"])


def checkpoint_digests(
    manifests: Manifests, profile: str, label: str, recorded: tuple[Any, Any] | None = None
) -> dict[str, str] | None:
    """The bytes of model `label` as a run loads them: file name -> sha256 of every file of a tiny or local
    model's directory (the tiny world's tokenizer files too); for a Hub model, the id of each file of its
    snapshot as the Hub cache names the blob (a content hash: sha256 for LFS files). None where the files are
    not on this machine (a tiny world not built yet, a snapshot not downloaded): nothing to compare. Nothing is
    built or downloaded. A run records them when it starts and is "changed" when one differs. `recorded`: the
    digests and file stamps (checkpoint_stamps) a run recorded; a file whose stamp is unchanged keeps its recorded
    digest instead of being read again (another process of the run: its evaluation, a resume)."""
    source = manifests.model(profile, label)["source"]
    if source["kind"] == "hub":
        entry = (read_lock(manifests.root / "lock.yaml").get("models") or {}).get(source["repo"]) or {}
        snapshot = _hub_snapshot(source["repo"], entry.get("full")) if entry.get("full") else None
        return (
            {name: Path(os.path.realpath(snapshot / name)).name for name in files_under(snapshot)} if snapshot else None
        )
    files = _local_files(manifests, source)
    if files is None:
        return None
    digests, stamps = (entry if isinstance(entry, dict) else {} for entry in (recorded or (None, None)))
    return {
        name: digests[name] if name in digests and stamps.get(name) == file_stamp(path) else file_sha256(path)
        for name, path in files.items()
    }


def local_model_config(manifests: Manifests, profile: str, label: str) -> dict[str, Any] | None:
    """config.json of a tiny or local model whose files are here, read without building or loading anything (no
    torch, no transformers); None for a Hub model or files not here."""
    source = manifests.model(profile, label)["source"]
    path = (None if source["kind"] == "hub" else _local_files(manifests, source) or {}).get("config.json")
    return json.loads(path.read_text()) if path is not None else None


def require_world_bytes(manifests: Manifests, profile: str, label: str) -> None:
    """ConfigError naming the file unless tiny model `label`'s files and the tiny tokenizer's are the bytes the
    world's world.json records (WORLD_FILES, written when it was built): one flipped byte in a committed
    model.safetensors is refused before a run starts, not learned from. Nothing for another kind of model, a world
    not built yet or one whose world.json predates WORLD_FILES."""
    source = manifests.model(profile, label)["source"]
    if source["kind"] != "tiny":
        return
    from gropd.tiny.recipe import WORLD_FILES, load_recipe, world_directory

    world = world_directory(load_recipe(tiny_recipe_path(manifests, source))[1])
    info = world / "world.json"
    recorded = (json.loads(info.read_text()) if info.is_file() else {}).get(WORLD_FILES)
    if not isinstance(recorded, dict):
        return
    for name, digest in (checkpoint_digests(manifests, profile, label) or {}).items():
        where = name if name.startswith("tokenizer/") else f"models/{source['label']}/{name}"
        if recorded.get(where) != digest:
            listed = f"records {recorded[where][:16]}..." if where in recorded else "does not list it"
            raise ConfigError(
                str(world / where),
                "sha256",
                f"{digest[:16]}..., but {info} {listed} (the tiny world's files changed since it was built)",
                f"the world as built: `git checkout -- {world}` for the committed one, or `python -m gropd.cli world "
                "--rebuild`",
            )


def checkpoint_stamps(manifests: Manifests, profile: str, label: str) -> dict[str, list[int]] | None:
    """file_stamp of every file of a tiny or local model (None for a Hub model, named by content, or files not
    here): recorded beside its digests, so that a later process of the run need not read unchanged files again."""
    source = manifests.model(profile, label)["source"]
    files = None if source["kind"] == "hub" else _local_files(manifests, source)
    return None if files is None else {name: file_stamp(path) for name, path in files.items()}


def file_stamp(path: Path) -> list[int]:
    """What changes when a file is written or replaced: size, modification and status-change times, inode (the
    status-change time cannot be set back by hand, as the modification time can)."""
    stat = path.stat()
    return [stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino]


def _local_files(manifests: Manifests, source: dict[str, Any]) -> dict[str, Path] | None:
    """Name -> path of a tiny or local model's files (the tiny world's tokenizer's too), None when not here."""
    if source["kind"] == "tiny":
        from gropd.tiny.recipe import load_recipe, world_directory

        world = world_directory(
            load_recipe(tiny_recipe_path(manifests, source))[1]
        )  # where ensure_tiny_world builds it
        folders = {"": world / "models" / source["label"], "tokenizer/": world / "tokenizer"}
    else:
        folders = {"": Path(source["path"])}
    if not all(folder.is_dir() for folder in folders.values()):
        return None
    return {prefix + name: folder / name for prefix, folder in folders.items() for name in files_under(folder)}


def _hub_snapshot(repo: str, revision: str) -> Path | None:
    """The local snapshot directory of `repo` at `revision` in the Hub cache, None when it is not there."""
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(repo, revision=revision, local_files_only=True))
    except Exception:  # huggingface_hub's LocalEntryNotFoundError and kin: not in this machine's cache
        return None


def model_config(ref: CheckpointRef) -> dict:
    """The checkpoint's config.json as a mapping (from the Hub cache, or downloaded alone: no weights)."""
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(ref.path, revision=ref.revision).to_dict()


RAM_EFFICIENT_LOADING = (
    "FSDP_CPU_RAM_EFFICIENT_LOADING"  # set by `accelerate launch` from fsdp_cpu_ram_efficient_loading
)


def load_model(ref: CheckpointRef, device: torch.device, dtype: str, every_rank: bool = False) -> torch.nn.Module:
    """The checkpoint's causal LM in `dtype` on `device`.

    Under `accelerate launch` with FSDP and fsdp_cpu_ram_efficient_loading (our launch configs), transformers
    5.20.2 keeps real weights on each node's local rank 0 only and gives every other rank zeros
    (`PreTrainedModel._move_missing_keys_from_meta_to_device`, behind `is_fsdp_enabled()`), relying on
    accelerate's prepare to broadcast rank 0's (`fsdp2_prepare_model`). That is right for the student, which is
    prepared; a model nobody prepares (the transformers teacher) takes `every_rank`: this load runs with the
    variable off, so every rank reads the real weights (they are the same file)."""
    from transformers import AutoModelForCausalLM

    from gropd.model.rotary_table import tabulate_rotary

    with _ram_efficient_loading(not every_rank):
        model = AutoModelForCausalLM.from_pretrained(ref.path, revision=ref.revision, dtype=torch_dtype(dtype))
    return tabulate_rotary(model).to(device)


@contextmanager
def _ram_efficient_loading(allowed: bool) -> Iterator[None]:
    """The launcher's FSDP_CPU_RAM_EFFICIENT_LOADING as it is (`allowed`), or "false" for the block."""
    before = os.environ.get(RAM_EFFICIENT_LOADING)
    if not allowed and before is not None:
        os.environ[RAM_EFFICIENT_LOADING] = "false"
    try:
        yield
    finally:
        if before is not None:
            os.environ[RAM_EFFICIENT_LOADING] = before


def require_same_on_every_rank(model: torch.nn.Module, what: str) -> None:
    """RuntimeError on every rank unless all processes of the world hold the same weights (Σ|w| of the state
    dict in float64, gathered); rank 0 says so on stderr. A model loaded as zeros on some ranks (load_model) stops
    here, before it scores anything. Nothing to compare without a process group of two or more."""
    import torch
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return
    total = torch.zeros((), dtype=torch.float64, device=next(model.parameters()).device)
    with torch.no_grad():
        for tensor in model.state_dict().values():
            for chunk in tensor.reshape(-1).split(1 << 20):  # float64 one chunk at a time, not a copy of the model
                total += chunk.abs().sum(dtype=torch.float64)
    sums: list[float | None] = [None] * dist.get_world_size()
    dist.all_gather_object(sums, float(total))
    if any(abs(value - sums[0]) > 1e-9 * max(1.0, abs(sums[0])) for value in sums):
        raise RuntimeError(
            f"{what} differs between the processes (Σ|w| by rank: {sums}): it was not loaded with the same weights "
            "on every rank (see gropd/model/checkpoints.py load_model)"
        )
    if dist.get_rank() == 0:
        print(f"{what}: the same weights on all {len(sums)} processes (Σ|w| = {sums[0]:.6g})", file=sys.stderr)


def load_tokenizer(ref: CheckpointRef):  # -> PreTrainedTokenizerBase
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(ref.tokenizer_path, revision=ref.revision)


def check_same_tokenizer(teacher_tok, student_tok, teacher: str, student: str) -> None:
    """Scoring appends student token ids to the teacher's prompt: the vocabularies must be identical."""
    if teacher_tok.get_vocab() != student_tok.get_vocab():
        raise ValueError(
            f"teacher {teacher} and student {student} have different tokenizers; on-policy distillation "
            "scores the student's token ids under the teacher, so the pairing needs one shared vocabulary"
        )

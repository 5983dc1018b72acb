"""Where a model label's weights come from in a profile, and loading them.

hub: the repo at the full revision from experiments/lock.yaml (paper runs refuse unpinned
models); tiny: the suite's own tiny world (built on first use); local: a directory.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from gropd.config.lock import pinned_revision, read_lock
from gropd.config.manifests import Manifests

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}


@dataclass(frozen=True)
class CheckpointRef:
    """A loadable checkpoint: a Hub repo or a local directory, and the exact revision."""

    path: str
    revision: str | None
    tokenizer_path: str

    def describe(self) -> str:
        return f"{self.path}@{self.revision}" if self.revision else self.path


def checkpoint_ref(manifests: Manifests, profile: str, label: str) -> CheckpointRef:
    """Resolve a model label of `profile` to a loadable reference."""
    source = manifests.model(profile, label)["source"]
    if source["kind"] == "hub":
        lock_path = manifests.root / "lock.yaml"
        full = pinned_revision(read_lock(lock_path), source["repo"], str(source["revision"]), lock_path)
        return CheckpointRef(path=source["repo"], revision=full, tokenizer_path=source["repo"])
    if source["kind"] == "tiny":
        from gropd.tiny.world import ensure_tiny_world

        world = ensure_tiny_world(manifests.root / "tiny_world.yaml")
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
        from gropd.tiny.world import label_hash, load_recipe

        recipe, _ = load_recipe(manifests.root / "tiny_world.yaml")
        return f"tiny {source['label']} {label_hash(recipe, source['label'])[:12]}"
    return str(source["path"])


def model_config(ref: CheckpointRef) -> dict:
    """The checkpoint's config.json as a mapping (from the Hub cache, or downloaded alone: no weights)."""
    from transformers import AutoConfig

    return AutoConfig.from_pretrained(ref.path, revision=ref.revision).to_dict()


def load_model(ref: CheckpointRef, device: torch.device, dtype: str) -> torch.nn.Module:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(ref.path, revision=ref.revision, dtype=DTYPES[dtype])
    return model.to(device)


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

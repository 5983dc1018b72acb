"""Random Qwen3 models with the tiny world's tokenizer, and a scratch copy of experiments/ whose rehearsal
profile loads them: what the rehearsals train where no real checkpoint can be (nothing is downloaded).

A model's shape is a dict of Qwen3Config numbers; where it has no vocab_size the tokenizer's is used. A larger
vocabulary (Qwen3's 151,936) keeps the log-prob head's true cost: ids past the tokenizer's decode to nothing.
"""

from __future__ import annotations

import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def write_random_models(
    scratch: Path,
    shapes: dict[str, dict],
    std: float | None = None,
    dtype: str = "float32",
    device: str = "cpu",
    max_positions: int = 4096,
) -> dict[str, Path]:
    """One model per label of `shapes` in scratch/models/<label> (seeded by its place in `shapes`), weights
    N(0, std²) where given (else Qwen3's own initialisation), saved in `dtype`, built on `device`."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    from gropd.tiny.tokenizer import build_tokenizer

    tokenizer = build_tokenizer()
    folders = {}
    for seed, (label, shape) in enumerate(shapes.items()):
        torch.manual_seed(seed)
        config = Qwen3Config(
            **{"vocab_size": len(tokenizer), "tie_word_embeddings": True, **shape},
            max_position_embeddings=max_positions,
            eos_token_id=tokenizer.eos_token_id,
            pad_token_id=tokenizer.pad_token_id,
            bos_token_id=None,
        )
        with torch.device(device):
            model = Qwen3ForCausalLM(config).float()
        if std is not None:
            with torch.no_grad():
                for parameter in model.parameters():
                    if parameter.dim() > 1:
                        parameter.normal_(0.0, std)
        folders[label] = scratch / "models" / label
        model.to(getattr(torch, dtype)).save_pretrained(folders[label])
        tokenizer.save_pretrained(folders[label])
        del model
    return folders


def point_rehearsal_models(scratch: Path, folders: dict[str, Path]) -> None:
    """experiments/ copied to scratch/experiments with the rehearsal profile's models of `folders` (label ->
    folder) loaded from there; every other model and profile as it was."""
    import yaml

    shutil.copytree(REPO / "experiments", scratch / "experiments", ignore=shutil.ignore_patterns("runs", "lock.yaml"))
    manifest = scratch / "experiments" / "models.yaml"
    models = yaml.safe_load(manifest.read_text())
    models["rehearsal"] = {  # a copy: the file's `rehearsal: *tiny_models` alias shares the tiny profile's mapping
        label: {**record, "source": {"kind": "local", "path": str(folders[label])}} if label in folders else record
        for label, record in models["rehearsal"].items()
    }
    manifest.write_text(yaml.safe_dump(models))

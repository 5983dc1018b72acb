"""gropd/train/tied_weights.py: accelerate's "Removed shared tensor" warning is dropped for the weights a model
declares tied, and only for them; the checkpoint still restores the tie."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch
from accelerate import Accelerator
from toy_model import toy_qwen3

from gropd.train.tied_weights import SAVING_LOGGER, declared_tied, tied_weights_saved_quietly


def saved_warnings(model: torch.nn.Module, path: Path, caplog: pytest.LogCaptureFixture, quiet: bool) -> list[str]:
    accelerator = Accelerator(cpu=True)
    prepared = accelerator.prepare(model)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger=SAVING_LOGGER):
        if quiet:
            with tied_weights_saved_quietly(accelerator.unwrap_model(prepared)):
                accelerator.save_state(str(path))
        else:
            accelerator.save_state(str(path))
    return [r.getMessage() for r in caplog.records if "Removed shared tensor" in r.getMessage()]


def test_a_tied_lm_head_is_saved_once_without_the_warning_and_loads_tied(tmp_path, caplog) -> None:
    model = toy_qwen3(50, tie_word_embeddings=True)
    assert declared_tied(model) == {"lm_head.weight", "model.embed_tokens.weight"}
    (loud,) = saved_warnings(model, tmp_path / "loud", caplog, quiet=False)  # what every checkpoint printed
    assert loud.endswith(
        "Removed shared tensor {'lm_head.weight'} while saving. This should be OK, but check by verifying that you "
        "don't receive any warning while reloading"
    )
    assert saved_warnings(model, tmp_path / "quiet", caplog, quiet=True) == []
    restored = toy_qwen3(50, seed=1, tie_word_embeddings=True)
    accelerator = Accelerator(cpu=True)
    restored = accelerator.prepare(restored)
    accelerator.load_state(str(tmp_path / "quiet"))
    assert torch.equal(restored.lm_head.weight, model.lm_head.weight)
    assert restored.lm_head.weight.data_ptr() == restored.model.embed_tokens.weight.data_ptr()


def test_a_shared_tensor_the_model_does_not_declare_tied_still_warns(tmp_path, caplog) -> None:
    model = toy_qwen3(50, tie_word_embeddings=False)
    model.model.norm.weight = model.model.layers[0].input_layernorm.weight  # an alias nothing declares
    assert declared_tied(model) == frozenset()
    assert len(saved_warnings(model, tmp_path / "alias", caplog, quiet=True)) == 1

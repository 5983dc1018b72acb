"""A checkpoint stores tied weights once, and says nothing about it.

accelerate's `save_state` writes safetensors, which cannot hold two names for one storage: it keeps the first name
and logs "Removed shared tensor {names} while saving. This should be OK, but check ..." at every checkpoint. For the
weights a transformers model declares tied (`_tied_weights_keys`, e.g. Qwen3's `lm_head.weight` →
`model.embed_tokens.weight` when `tie_word_embeddings`), that is the layout loading expects: `load_state` fills the
kept name and the tie makes the other the same tensor (a resumed run equals an uninterrupted one:
tests/test_trainer.py). So exactly that warning is dropped; a removed name the model does not declare tied still warns.
"""

from __future__ import annotations

import ast
import logging
from collections.abc import Iterator
from contextlib import contextmanager

import torch

SAVING_LOGGER = "accelerate.utils.other"  # clean_state_dict_for_safetensors's logger (accelerate 1.15)
PREFIX, SUFFIX = "Removed shared tensor ", " while saving."


def declared_tied(model: torch.nn.Module) -> frozenset[str]:
    """Both names of every pair of weights `model` declares tied and has tied (an untied config declares none)."""
    tied = getattr(model, "_tied_weights_keys", None) or {}
    if not isinstance(tied, dict) or not getattr(getattr(model, "config", None), "tie_word_embeddings", False):
        return frozenset()
    return frozenset(name for pair in tied.items() for name in pair)


class _DeclaredTiedOnly(logging.Filter):
    def __init__(self, tied: frozenset[str]) -> None:
        super().__init__()
        self.tied = tied

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()  # accelerate's logger may prefix it ("[RANK 0] ")
        start, end = message.find(PREFIX), message.find(SUFFIX)
        if start < 0 or end < start:
            return True
        try:
            removed = ast.literal_eval(message[start + len(PREFIX) : end])
        except (ValueError, SyntaxError):
            return True
        return not (isinstance(removed, set) and removed and removed <= self.tied)


@contextmanager
def tied_weights_saved_quietly(model: torch.nn.Module) -> Iterator[None]:
    """Within the block, accelerate's warning is dropped when every name it removed is one `model` declares tied."""
    logger, quiet = logging.getLogger(SAVING_LOGGER), _DeclaredTiedOnly(declared_tied(model))
    logger.addFilter(quiet)
    try:
        yield
    finally:
        logger.removeFilter(quiet)

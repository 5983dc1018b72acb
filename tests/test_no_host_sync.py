"""A micro-step's forward and backward read nothing back from the device (on a GPU each read stalls the host
until the GPU has caught up; on an H200 these were 43 ms of a 0.34 s micro-step): recorded below autograd with a
TorchDispatchMode on CPU, every aten op of the log-prob forward (packed rows and shared prompts) and its
backward, and none may be one that synchronises: a boolean-mask selection (nonzero, masked_select,
masked_scatter, index with a bool mask), a scalar read (`.item()`, `float(t)`: _local_scalar_dense), but the two
reads transformers' own mask code makes (THEIRS)."""

from __future__ import annotations

import traceback

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from toy_model import toy_qwen3

from gropd.model.logprobs import logprob_score, pack, response_scores, shared_prompt_scores

CPU = torch.device("cpu")
SYNCING = {"nonzero", "masked_select", "masked_scatter", "masked_scatter_", "_local_scalar_dense", "item"}
# transformers 5.20.2's own: masking_utils.py asks once a forward whether the padding mask is all ones (lines 271 and
# 277, to let SDPA use is_causal); not this project's code, left to transformers
THEIRS = ("transformers/masking_utils.py",)


class Recorded(TorchDispatchMode):
    """The aten ops dispatched inside the block, with those that read a device value found out."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []
        self.syncing: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func._schema.name.split("::")[-1]
        self.ops.append(name)
        bool_index = name == "index" and any(
            isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in (args[1] if len(args) > 1 else [])
        )
        frames = traceback.extract_stack()[:-1]  # (less this one)
        caller = next((f.filename for f in reversed(frames) if "/torch/" not in f.filename), "")
        if (name in SYNCING or bool_index) and not caller.endswith(THEIRS):
            self.syncing.append(name + (" (a boolean mask)" if bool_index else "") + f" from {caller}")
        return func(*args, **(kwargs or {}))


PROMPTS = [[1, 2, 3], [1, 2, 3], [4, 5]]
RESPONSES = [[6, 7, 8, 9], [10], [11, 12]]


def test_a_micro_steps_forward_and_backward_read_nothing_back() -> None:
    model = toy_qwen3(40, 0, tie_word_embeddings=True).train()
    for shared in (False, True):
        with Recorded() as seen:
            if shared:
                values = shared_prompt_scores(
                    model, [PROMPTS[0], PROMPTS[2]], [0, 0, 1], RESPONSES, 0, CPU, logprob_score()
                )
            else:
                values = response_scores(model, pack(PROMPTS, RESPONSES, 0, CPU), logprob_score())
            values[..., 0].sum().backward()
        assert seen.ops and seen.syncing == [], f"shared prompts {shared}: {sorted(set(seen.syncing))}"


def test_the_recorder_sees_a_boolean_mask_and_a_scalar_read() -> None:
    """The test above cannot pass by seeing nothing: the ops it forbids are recorded when they happen."""
    x = torch.arange(6.0)
    with Recorded() as seen:
        _ = x[x > 2]
        float(x.sum())
    assert [op.split(" from ")[0] for op in seen.syncing] == ["index (a boolean mask)", "_local_scalar_dense"]

"""Length balancing across data-parallel ranks (verl's balance_batch), beyond Table 3's fixed layout and off by
default (train.balance_ranks; the tiny profile never sets it).

Under FSDP2 every micro-step is a collective, so each waits for the rank whose rows are longest: a minibatch whose
long responses landed on one rank costs that rank's time on all. Balanced, the rows of minibatch k (the union of
every rank's k-th local minibatch: the rows Table 3's minibatch holds) are dealt out again by their forward tokens
(prompt + response), each rank first one of the longest, then longest first to the rank with the fewest tokens so
far (LPT; ties to the lower rank). Each rank then plans its micro-steps over the rows it was dealt
(gropd/model/forward_batches.py: by token budget, and with train.dynamic_batch by the budget alone).

The gradient is the unbalanced one up to float order: a row's loss is weighted by its share of the whole
minibatch's count whatever rank holds it (gropd/train/step.py accumulate_gradient) and the ranks' gradients are
summed, so only the order of the sums moves (tests/test_data_parallel.py: 2 gloo ranks against one process).
A row carries what the update reads of it: its tokens, π_S,old, A and the importance weights (train.tis_cap);
method fullkl's teacher states stay where they are (the config refuses balance_ranks with it).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from accelerate import Accelerator
from accelerate.utils import gather_object
from torch.nn.utils.rnn import pad_sequence

from gropd.model.logprobs import pack
from gropd.model.rollout.base import RolloutBatch


def deal_rows(costs: list[int], ranks: int) -> list[list[int]]:
    """Row indices for each of `ranks` ranks (each sorted): the `ranks` costliest rows one a rank, then the rest
    costliest first, each to the rank with the least total cost so far (ties: the lower rank). Needs at least as
    many rows as ranks, so that no rank is left without a forward to run."""
    if len(costs) < ranks:
        raise ValueError(f"{len(costs)} rows cannot give each of {ranks} ranks one")
    order = sorted(range(len(costs)), key=lambda row: (-costs[row], row))
    dealt: list[list[int]] = [[] for _ in range(ranks)]
    loads = [0] * ranks
    for position, row in enumerate(order):
        rank = position if position < ranks else min(range(ranks), key=lambda r: (loads[r], r))
        dealt[rank].append(row)
        loads[rank] += costs[row]
    return [sorted(rows) for rows in dealt]


def _row(rollout: Any, index: int) -> dict[str, Any]:
    """What the update reads of one row, on the CPU, cut to its response length."""
    length = int(rollout.packed.response_lengths[index])
    cut = lambda tensor: None if tensor is None else tensor[index, :length].detach().cpu()  # noqa: E731
    return {
        "prompt": rollout.batch.prompt_ids[index],
        "response": rollout.batch.response_ids[index],
        "finish": rollout.batch.finish_reasons[index],
        "logp_old": cut(rollout.logp_old),
        "advantages": cut(rollout.advantages),
        "is_weights": cut(rollout.is_weights),
    }


def _padded(rows: list[dict[str, Any]], key: str, width: int, device: torch.device) -> torch.Tensor | None:
    """`[B, width]` of the rows' `key`, right-padded with 0; None where the rollout has none."""
    if rows[0][key] is None:
        return None
    values = pad_sequence([row[key] for row in rows], batch_first=True)
    return torch.nn.functional.pad(values, (0, width - values.shape[1])).to(device)


def balanced_minibatch(accelerator: Accelerator, rollout: Any, minibatch: list[int], pad_id: int) -> Any:
    """This rank's dealt rows of the minibatch whose local rows are `minibatch` (module docstring), as a rollout
    of its own (`dataclasses.replace` of `rollout`, gropd/train/step.py Rollout): its every row is the minibatch's.
    A collective: every rank calls it for each minibatch."""
    parts = gather_object([[_row(rollout, index) for index in minibatch]])
    rows = [row for part in parts for row in part]
    costs = [len(row["prompt"]) + len(row["response"]) for row in rows]
    mine = [rows[i] for i in deal_rows(costs, accelerator.num_processes)[accelerator.process_index]]
    batch = RolloutBatch(
        prompt_ids=[row["prompt"] for row in mine],
        response_ids=[row["response"] for row in mine],
        finish_reasons=[row["finish"] for row in mine],
    )
    packed = pack(batch.prompt_ids, batch.response_ids, pad_id, accelerator.device)
    width = packed.response_ids.shape[1]
    return dataclasses.replace(
        rollout,
        questions=[],
        batch=batch,
        packed=packed,
        logp_old=_padded(mine, "logp_old", width, accelerator.device),
        advantages=_padded(mine, "advantages", width, accelerator.device),
        is_weights=_padded(mine, "is_weights", width, accelerator.device),
        teacher_hidden=None,
    )

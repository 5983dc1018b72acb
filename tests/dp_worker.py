"""Worker for test_data_parallel.py: two optimiser updates from a fixed synthetic rollout.

`python tests/dp_worker.py OUT single` runs one process; under `torchrun --nproc_per_node 2`
the modes `ddp` (accelerate's prepare: DistributedDataParallel over gloo) and `fsdp2`
(torch's fully_shard per decoder layer, parameters sharded over the 2 CPU processes) run
the trainer's own `assign_prompts` and `update_policy`; rank 0 writes the weights and the number
of DDP gradient all-reductions (a comm hook counts them; 0 for fsdp2) to OUT.
Mode `responses` (4 processes, DDP) takes minibatches of 8 responses = 2 prompts of G = 4, fewer
prompts than processes: each rank's share is 2 responses, part of a group; `single-responses` is
one process that updates on the same global minibatches (rank r's k-th share, r = 0..3, in a row).
Modes `single-sgd` (one process) and `packed` (2 processes, fsdp2 sharding) update with plain SGD and no gradient
clipping, so the weights move by the summed gradient itself; `packed` deals each minibatch's rows to the ranks by
tokens (train.balance_ranks) and packs micro-steps by a 24-token budget alone (train.dynamic_batch), and saves
rank 0's forward tokens of each minibatch before and after the deal.
Mode `uneven` (fsdp2 sharding, a 20-second process-group timeout) runs the trainer's π_S,old
recompute on 4 rows a rank, responses of 5 tokens on rank 0 and 20 on rank 1 with a 40-token
budget, and writes each rank's log-probs to OUT.<rank>.
"""

from __future__ import annotations

import os
import sys
from types import SimpleNamespace

import torch
from accelerate import Accelerator
from toy_model import toy_qwen3

from gropd.credit import method
from gropd.model.logprobs import pack, response_logprobs
from gropd.model.rollout.base import RolloutBatch
from gropd.train.step import Rollout, StepContext, assign_prompts, update_policy
from gropd.train.world import leave

PROMPTS, G, VOCAB = 8, 4, 20
TRAIN = SimpleNamespace(
    prompts_per_batch=PROMPTS,
    group_size=G,
    minibatch_responses=16,
    per_device_batch=4,
    clip_low=0.2,
    clip_high=0.28,
    agg="token-mean",
    max_grad_norm=1.0,
    dynamic_batch=False,
    balance_ranks=False,
)
BACKEND = SimpleNamespace(max_tokens_per_forward=10**6, share_prompt_forward=False)
CONFIG = SimpleNamespace(method="gropd", train=TRAIN, sampling=SimpleNamespace(temperature=1.0), backend=BACKEND)
SGD_LR = 1.0  # modes `single-sgd` and `packed`: plain SGD, no gradient clipping: the weights move by -lr x gradient
SGD_CONFIG = SimpleNamespace(**{**vars(CONFIG), "train": SimpleNamespace(**{**vars(TRAIN), "max_grad_norm": 1e9})})
PACKED_CONFIG = SimpleNamespace(  # 2 FSDP2 ranks: rows dealt by tokens, micro-steps of <= 24 packed tokens, any rows
    **{
        **vars(SGD_CONFIG),
        "train": SimpleNamespace(**{**vars(SGD_CONFIG.train), "dynamic_batch": True, "balance_ranks": True}),
        "backend": SimpleNamespace(max_tokens_per_forward=24, share_prompt_forward=False),
    }
)
RESPONSES_WORLD = 4  # mode `responses`: 4 processes, minibatches of 8 responses (2 prompts)
RESPONSES_CONFIG = SimpleNamespace(
    **{**vars(CONFIG), "train": SimpleNamespace(**{**vars(TRAIN), "minibatch_responses": 8})}
)


def group(step: int, p: int) -> tuple[list[int], list[tuple[list[int], torch.Tensor]]]:
    """Prompt p's tokens and its G (response, advantages): a function of (step, p) only."""
    g = torch.Generator().manual_seed(1000 * step + p)
    prompt = torch.randint(1, VOCAB, (int(torch.randint(2, 6, (1,), generator=g)),), generator=g).tolist()
    samples = []
    for _ in range(G):
        length = int(torch.randint(1, 7, (1,), generator=g))
        samples.append((torch.randint(1, VOCAB, (length,), generator=g).tolist(), torch.randn(6, generator=g)))
    return prompt, samples


def synthetic_rollout(step: int, rows: list[tuple[int, int]], model, device) -> Rollout:
    """Rows (prompt p, sample j) of a rollout whose every number depends only on (step, p, j)."""
    prompts, responses, advantages = [], [], []
    for p, j in rows:
        prompt, samples = group(step, p)
        prompts.append(prompt)
        responses.append(samples[j][0])
        advantages.append(samples[j][1])
    packed = pack(prompts, responses, 0, device)
    with torch.no_grad():
        logp_old, _ = response_logprobs(model, packed)
    width = packed.response_ids.shape[1]
    A = torch.stack(advantages)[:, :width] * packed.response_mask
    batch = RolloutBatch(prompt_ids=prompts, response_ids=responses, finish_reasons=["stop"] * len(responses))
    zeros = torch.zeros_like(A)
    return Rollout(
        questions=[],
        batch=batch,
        packed=packed,
        logp_old=logp_old,
        teacher_logp=zeros,
        entropy=zeros,
        f=zeros,
        advantages=A,
        scores=torch.zeros(len(responses)),
        degenerate_groups=0,
        seconds={},
        peaks_gib={},
    )


def build(mode: str, accelerator: Accelerator):
    model = toy_qwen3(VOCAB)
    if mode in ("fsdp2", "packed"):
        from torch.distributed.fsdp import fully_shard

        for layer in model.model.layers:
            fully_shard(layer)
        fully_shard(model)
    sgd = mode in ("single-sgd", "packed")
    optimizer = (
        torch.optim.SGD(model.parameters(), lr=SGD_LR) if sgd else torch.optim.AdamW(model.parameters(), lr=1e-2)
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
    if mode not in ("fsdp2", "packed"):
        model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
    return model, optimizer, scheduler


def uneven(out: str) -> None:
    """The π_S,old pass of gropd.train.step.old_logprobs on rows whose lengths differ between the ranks."""
    from datetime import timedelta

    from accelerate.utils import InitProcessGroupKwargs

    from gropd.train.step import old_logprobs

    accelerator = Accelerator(cpu=True, kwargs_handlers=[InitProcessGroupKwargs(timeout=timedelta(seconds=20))])
    model, _, _ = build("fsdp2", accelerator)
    length = 5 if accelerator.process_index == 0 else 20
    prompts = [[1, 2, 3, 4, 5]] * 4
    responses = [[(7 * row + t) % (VOCAB - 1) + 1 for t in range(length)] for row in range(4)]
    batch = RolloutBatch(prompt_ids=prompts, response_ids=responses, finish_reasons=["stop"] * 4)
    config = SimpleNamespace(
        backend=SimpleNamespace(old_logprobs="recompute", max_tokens_per_forward=40, share_prompt_forward=False),
        sampling=SimpleNamespace(temperature=1.0),
        train=SimpleNamespace(checkpoint_every=1),
    )
    ctx = StepContext(accelerator, model, None, None, None, None, None, None, None, 0, None)
    logp, entropy, _, planned = old_logprobs(ctx, config, batch, length, step=1)
    torch.save(
        {"logp": logp, "entropy": entropy, "planned": planned, "responses": responses},
        f"{out}.{accelerator.process_index}",
    )


def local_rows(step: int, rank: int, world: int) -> list[tuple[int, int]]:
    """A rank's rows as the trainer holds them: its prompts (assign_prompts), each with its G samples."""
    return [(p, j) for p in assign_prompts(PROMPTS, seed=step, rank=rank, world=world) for j in range(G)]


def global_minibatch_rows(step: int) -> list[tuple[int, int]]:
    """Mode `responses`' rows in one process: global minibatch k = rank r's k-th share of 2 rows, r = 0..3."""
    shares = [local_rows(step, rank, RESPONSES_WORLD) for rank in range(RESPONSES_WORLD)]
    return [row for k in range(0, len(shares[0]), 2) for share in shares for row in share[k : k + 2]]


def count_reductions(model) -> list[int]:
    """A DDP comm hook that counts the gradient all-reductions and then runs DDP's own."""
    from torch.distributed.algorithms.ddp_comm_hooks.default_hooks import allreduce_hook

    count = [0]

    def hook(state, bucket):
        count[0] += 1
        return allreduce_hook(state, bucket)

    model.register_comm_hook(None, hook)
    return count


def main(out: str, mode: str) -> None:
    if mode == "uneven":
        uneven(out)
        return
    accelerator = Accelerator(cpu=True)
    model, optimizer, scheduler = build("ddp" if mode == "responses" else mode.removesuffix("-responses"), accelerator)
    kind = type(model).__name__
    expected = {"single": "Qwen3ForCausalLM", "ddp": "DistributedDataParallel", "fsdp2": "FSDPQwen3ForCausalLM"}
    expected |= {"responses": expected["ddp"], "single-responses": expected["single"]}
    expected |= {"single-sgd": expected["single"], "packed": expected["fsdp2"]}
    dealt = record_dealt() if mode == "packed" else []
    world = {"single": 1, "single-responses": 1, "single-sgd": 1, "responses": RESPONSES_WORLD}.get(mode, 2)
    assert kind == expected[mode] and accelerator.num_processes == world, kind
    reductions = count_reductions(model) if kind == "DistributedDataParallel" else [0]
    before = {k: v.full_tensor() if hasattr(v, "full_tensor") else v.clone() for k, v in model.state_dict().items()}
    config = RESPONSES_CONFIG if mode.endswith("responses") else CONFIG
    config = {"single-sgd": SGD_CONFIG, "packed": PACKED_CONFIG}.get(mode, config)
    ctx = StepContext(accelerator, model, optimizer, scheduler, None, None, None, None, None, 0, None)
    ctx.method = method(config.method)
    for step in (1, 2):
        rank = accelerator.process_index
        rows = global_minibatch_rows(step) if mode == "single-responses" else local_rows(step, rank, world)
        update_policy(ctx, config, synthetic_rollout(step, rows, model, accelerator.device))
    state = {k: v.full_tensor() if hasattr(v, "full_tensor") else v for k, v in model.state_dict().items()}
    moved = max((state[k] - before[k]).abs().max().item() for k in state)
    assert moved > 1e-3  # the updates did move the weights
    if accelerator.is_main_process:
        weights = {k.removeprefix("module."): v.detach().cpu() for k, v in state.items()}
        torch.save({"weights": weights, "reductions": reductions[0], "moved": moved, "dealt": dealt}, out)


def record_dealt() -> list[tuple[int, int]]:
    """Mode `packed`: gropd.train.step's balanced_minibatch wrapped to note, for each minibatch, this rank's
    forward tokens before and after the rows were dealt (rank 0's list is saved)."""
    import gropd.train.step as step

    dealt, balanced = [], step.balanced_minibatch

    def noted(accelerator, rollout, minibatch, pad_id):
        view = balanced(accelerator, rollout, minibatch, pad_id)
        tokens = lambda batch, rows: sum(len(batch.prompt_ids[r]) + len(batch.response_ids[r]) for r in rows)  # noqa: E731
        dealt.append((tokens(rollout.batch, minibatch), tokens(view.batch, range(len(view.batch.response_ids)))))
        return view

    step.balanced_minibatch = noted
    return dealt


def end_process(mode: str) -> None:
    """Meet, destroy the process group, then leave as gropd.cli does (gropd/train/world.py `leave`: a rank ends by
    os._exit, skipping the interpreter's teardown, where a rank aborted in C++ in CI). The line on stderr tells a
    failure's message whether this rank got that far."""
    print(f"{mode}: rank {os.environ.get('RANK', '0')} done, ending its process group", file=sys.stderr, flush=True)
    if torch.distributed.is_initialized():
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()
    leave(0)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
    end_process(sys.argv[2])  # only after success: a barrier with a failed rank would wait for its timeout

"""Worker for test_data_parallel.py: two optimiser updates from a fixed synthetic rollout.

`python tests/dp_worker.py OUT single` runs one process; under `torchrun --nproc_per_node 2`
the modes `ddp` (accelerate's prepare: DistributedDataParallel over gloo) and `fsdp2`
(torch's fully_shard per decoder layer, parameters sharded over the 2 CPU processes) run
the trainer's own `assign_prompts` and `update_policy`; rank 0 writes the weights to OUT.
Mode `uneven` (fsdp2 sharding, a 20-second process-group timeout) runs the trainer's π_S,old
recompute on 4 rows a rank, responses of 5 tokens on rank 0 and 20 on rank 1 with a 40-token
budget, and writes each rank's log-probs to OUT.<rank>.
"""

from __future__ import annotations

import sys
from types import SimpleNamespace

import torch
from accelerate import Accelerator
from transformers import Qwen3Config, Qwen3ForCausalLM

from gropd.model.logprobs import pack, response_logprobs
from gropd.model.rollout.base import RolloutBatch
from gropd.train.step import Rollout, StepContext, assign_prompts, update_policy

PROMPTS, G, VOCAB = 8, 4, 20
TRAIN = SimpleNamespace(
    minibatch_responses=16, per_device_batch=4, clip_low=0.2, clip_high=0.28, agg="token-mean", max_grad_norm=1.0
)
BACKEND = SimpleNamespace(max_tokens_per_forward=10**6, share_prompt_forward=False)
CONFIG = SimpleNamespace(train=TRAIN, sampling=SimpleNamespace(temperature=1.0), backend=BACKEND)


def synthetic_rollout(step: int, prompts_here: list[int], model, device) -> Rollout:
    """Prompt p's G responses and advantages depend only on (step, p), never on the process."""
    prompts, responses, advantages = [], [], []
    for p in prompts_here:
        g = torch.Generator().manual_seed(1000 * step + p)
        prompt = torch.randint(1, VOCAB, (int(torch.randint(2, 6, (1,), generator=g)),), generator=g).tolist()
        for _ in range(G):
            length = int(torch.randint(1, 7, (1,), generator=g))
            responses.append(torch.randint(1, VOCAB, (length,), generator=g).tolist())
            prompts.append(prompt)
            advantages.append(torch.randn(6, generator=g))
    packed = pack(prompts, responses, 0, device)
    with torch.no_grad():
        logp_old, _ = response_logprobs(model, packed)
    width = packed.response_ids.shape[1]
    A = torch.stack(advantages)[:, :width] * packed.response_mask
    batch = RolloutBatch(prompt_ids=prompts, response_ids=responses, finish_reasons=["stop"] * len(responses))
    zeros = torch.zeros_like(A)
    return Rollout([], batch, packed, logp_old, zeros, zeros, zeros, A, torch.zeros(len(responses)), 0, {})


def build(mode: str, accelerator: Accelerator):
    torch.manual_seed(0)
    config = Qwen3Config(
        vocab_size=VOCAB,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        max_position_embeddings=64,
    )
    model = Qwen3ForCausalLM(config)
    if mode == "fsdp2":
        from torch.distributed.fsdp import fully_shard

        for layer in model.model.layers:
            fully_shard(layer)
        fully_shard(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
    if mode != "fsdp2":
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


def main(out: str, mode: str) -> None:
    if mode == "uneven":
        uneven(out)
        return
    accelerator = Accelerator(cpu=True)
    model, optimizer, scheduler = build(mode, accelerator)
    kind = type(model).__name__
    expected = {"single": "Qwen3ForCausalLM", "ddp": "DistributedDataParallel", "fsdp2": "FSDPQwen3ForCausalLM"}
    assert kind == expected[mode] and accelerator.num_processes == (1 if mode == "single" else 2), kind
    before = {k: v.full_tensor() if hasattr(v, "full_tensor") else v.clone() for k, v in model.state_dict().items()}
    ctx = StepContext(accelerator, model, optimizer, scheduler, None, None, None, None, None, 0, None)
    for step in (1, 2):
        mine = assign_prompts(PROMPTS, seed=step, rank=accelerator.process_index, world=accelerator.num_processes)
        update_policy(ctx, CONFIG, synthetic_rollout(step, mine, model, accelerator.device))
    state = {k: v.full_tensor() if hasattr(v, "full_tensor") else v for k, v in model.state_dict().items()}
    assert max((state[k] - before[k]).abs().max().item() for k in state) > 1e-3  # the updates did move the weights
    if accelerator.is_main_process:
        torch.save({k.removeprefix("module."): v.detach().cpu() for k, v in state.items()}, out)


def end_process_group() -> None:
    """Meet, then destroy the process group: a rank that exits with gloo's threads still up can abort in
    C++ ("terminate called without an active exception", seen once in CI) after its work is done."""
    if torch.distributed.is_initialized():
        torch.distributed.barrier()
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
    end_process_group()  # only after success: a barrier with a failed rank would wait for its timeout

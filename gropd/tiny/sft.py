"""Supervised fine-tuning that makes the tiny world's teachers and students.

A model is a small `Qwen3ForCausalLM` (random init from a seed, or another model's weights
when it continues that model's training) trained on worked solutions of all six tasks at once,
in each of its formats: a prompt mode and a solution style, written "mode/style":

    think/detailed     detailed worked solution inside <think>…</think>, then the boxed answer
    nothink/brief      brief worked solution after the empty think block
    default/brief      brief worked solution after "Answer:" (plain text, no chat template)
    default/detailed   the detailed one after "Answer:": reasoning written out at length

Loss: mean next-token cross-entropy over response tokens only (prompt and padding
masked, label −100). AdamW, linear warm-up then cosine decay to `min_lr_ratio`·lr.
Everything is deterministic from `seed` for a fixed thread count.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable

import torch
from transformers import PreTrainedTokenizerBase, Qwen3Config, Qwen3ForCausalLM

from eval.tiny_tasks import TASKS, train_questions, worked_solution
from gropd.templates import render_prompt, render_target
from gropd.tiny.recipe import ModelShape, SFTSettings, parse_format

IGNORE = -100


def build_model(shape: ModelShape, tokenizer: PreTrainedTokenizerBase, seed: int) -> Qwen3ForCausalLM:
    """A freshly initialised Qwen3ForCausalLM with tied embeddings, sized for `tokenizer`."""
    config = Qwen3Config(
        vocab_size=len(tokenizer),
        hidden_size=shape.hidden_size,
        intermediate_size=shape.intermediate_size,
        num_hidden_layers=shape.num_layers,
        num_attention_heads=shape.num_heads,
        num_key_value_heads=shape.num_heads,
        head_dim=shape.hidden_size // shape.num_heads,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        bos_token_id=None,
    )
    torch.manual_seed(seed)
    return Qwen3ForCausalLM(config)


def make_examples(
    tokenizer: PreTrainedTokenizerBase,
    formats: tuple[str, ...],
    instruction: str,
    pool_per_task: int,
    seed: int,
    tasks: tuple[str, ...] = TASKS,
) -> list[tuple[list[int], list[int]]]:
    """(prompt ids, response ids) for every training question of every task of `tasks` in every format."""
    examples = []
    for task in tasks:
        for record in train_questions(task, pool_per_task, seed):
            for mode, style in map(parse_format, formats):
                work = worked_solution(task, record["question"], style)
                prompt = render_prompt(record["question"], mode, tokenizer, instruction)
                target = render_target(work, record["answer"], mode)
                examples.append(
                    (
                        tokenizer(prompt, add_special_tokens=False)["input_ids"],
                        tokenizer(target, add_special_tokens=False)["input_ids"],
                    )
                )
    return examples


def collate(examples: list[tuple[list[int], list[int]]], pad_id: int) -> dict[str, torch.Tensor]:
    """Right-padded batch: input_ids, attention_mask and labels (−100 on prompt and padding), all [B, T]."""
    length = max(len(p) + len(r) for p, r in examples)
    input_ids = torch.full((len(examples), length), pad_id, dtype=torch.long)
    labels = torch.full((len(examples), length), IGNORE, dtype=torch.long)
    attention_mask = torch.zeros((len(examples), length), dtype=torch.long)
    for row, (prompt, response) in enumerate(examples):
        ids = prompt + response
        input_ids[row, : len(ids)] = torch.tensor(ids)
        labels[row, len(prompt) : len(ids)] = torch.tensor(response)
        attention_mask[row, : len(ids)] = 1
    return {"input_ids": input_ids, "attention_mask": attention_mask, "labels": labels}


def lr_at(step: int, settings: SFTSettings) -> float:
    """Learning rate at `step` (0-based): linear warm-up, then cosine from lr down to min_lr_ratio·lr."""
    if step < settings.warmup_steps:
        return settings.lr * (step + 1) / settings.warmup_steps
    progress = (step - settings.warmup_steps) / max(1, settings.steps - settings.warmup_steps)
    floor = settings.min_lr_ratio
    return settings.lr * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * progress)))


def response_loss(model: Qwen3ForCausalLM, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Mean cross-entropy of each response token given its prefix (logits [B, T, V] shifted by one)."""
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits
    return torch.nn.functional.cross_entropy(
        logits[:, :-1].flatten(0, 1), batch["labels"][:, 1:].flatten(), ignore_index=IGNORE
    )


def sft_train(
    model: Qwen3ForCausalLM,
    examples: list[tuple[list[int], list[int]]],
    settings: SFTSettings,
    pad_id: int,
    num_threads: int,
    log_every: int = 0,
    on_step: Callable[[int, Qwen3ForCausalLM], None] | None = None,
    until: int | None = None,
) -> list[float]:
    """Train `model` in place for settings.steps steps (or only the first `until` of them, on
    the same schedule); return the loss of every step.

    Each step draws batch_size examples uniformly (with replacement) from `examples`
    with a generator seeded by settings.seed. `on_step(step, model)` is called after
    every optimiser step (1-based) in eval mode, e.g. to save earlier checkpoints of the
    run; it must not change the model (the run's bits do not depend on it).
    """
    torch.set_num_threads(num_threads)
    torch.manual_seed(settings.seed)
    rng = random.Random(settings.seed)
    optimiser = torch.optim.AdamW(
        model.parameters(), lr=settings.lr, betas=(0.9, 0.98), weight_decay=settings.weight_decay
    )
    model.train()
    losses = []
    for step in range(settings.steps if until is None else until):
        for group in optimiser.param_groups:
            group["lr"] = lr_at(step, settings)
        batch = collate([examples[rng.randrange(len(examples))] for _ in range(settings.batch_size)], pad_id)
        loss = response_loss(model, batch)
        optimiser.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimiser.step()
        losses.append(loss.item())
        if on_step is not None:
            model.eval()
            on_step(step + 1, model)
            model.train()
        if log_every and (step + 1) % log_every == 0:
            print(f"  step {step + 1}/{settings.steps} loss {sum(losses[-log_every:]) / log_every:.4f}", flush=True)
    model.eval()
    return losses

"""Rollouts with a transformers model: a KV-cached sampling loop that reports its own log-probs.

    prefill   each distinct prompt once (left-padded, position ids counting real tokens only), its
              KV cache then repeated for the prompt's n samples (row i*n+j = sample j of prompt i)
    decode    one token per step for every unfinished row; z = logits / τ in float32,
              log π = log_softmax(z), H = −Σ π log π, the next token drawn from π (restricted to the
              smallest top-p nucleus when top_p < 1); the KV cache lives in preallocated buffers and
              is compacted to the unfinished rows whenever a quarter of them have finished
    stop      StopRule (gropd/model/rollout/base.py): a stop token or stop string ends a row

`sampler_logprobs` and `sampler_entropy` are log π(y_t | h_t) and H at every kept token under z, the
distribution the trainer's own log-prob forward computes (gropd/model/logprobs.py), so a run whose engine
samples the trained weights themselves can take them as π_S,old (`backend.old_logprobs: sampler`).

Which weights: with `engine_dtype` None the engine samples `model` itself (the tiny profile: one
float32 process), `samples_trained_weights` is True and sync_weights only follows the object. Given an
`engine_dtype`, it keeps its own unsharded copy in that dtype and loads the trainer's full weights into
it at every sync_weights, as the vLLM engine does: the paper path's layout (float32 masters, bf16
compute, FSDP shards), where sampling from the sharded model would run collectives a different number
of times on each rank.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from accelerate.utils import extract_model_from_parallel
from transformers import AutoModelForCausalLM, DynamicLayer
from transformers.cache_utils import Cache

from gropd.model.logprobs import prefill
from gropd.model.rollout.base import RolloutBatch, SamplingSettings, StopRule, finish_response, full_state_dict_items
from gropd.model.rotary_table import tabulate_rotary
from gropd.vector_math import exp

STRING_CHECK_EVERY = 8  # decode steps between checks of the unfinished rows' text for stop strings
COMPACT_FRACTION = 0.25  # drop finished rows from the batch once this share of it has finished


class _BufferLayer(DynamicLayer):
    """A cache layer whose keys and values `[B, heads, capacity, d]` are written in place (no
    concatenation per step); `keys`/`values` are views of the first `length` positions."""

    def __init__(self, capacity: int):
        super().__init__()
        self.capacity, self.length = capacity, 0

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        batch, heads, _, dim = key_states.shape
        self.dtype, self.device = key_states.dtype, key_states.device
        self._keys = key_states.new_empty(batch, heads, self.capacity, dim)
        self._values = value_states.new_empty(batch, heads, self.capacity, value_states.shape[-1])
        self.is_initialized = True

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        end = self.length + key_states.shape[-2]
        self._keys[:, :, self.length : end] = key_states
        self._values[:, :, self.length : end] = value_states
        self.length = end
        return self._views()

    def _views(self) -> tuple[torch.Tensor, torch.Tensor]:
        self.keys, self.values = self._keys[:, :, : self.length], self._values[:, :, : self.length]
        return self.keys, self.values

    def get_seq_length(self) -> int:
        return self.length

    def batch_repeat_interleave(self, repeats: int) -> None:
        self.batch_select_indices(
            torch.arange(len(self._keys)).repeat_interleave(repeats) if self.is_initialized else None
        )

    def batch_select_indices(self, indices: torch.Tensor | None) -> None:
        """Keep batch rows `indices` (in that order; repeats allowed). Only the filled positions are copied,
        not the whole capacity; an empty layer (as DynamicLayer) has nothing to select."""
        if not self.is_initialized:
            return
        for name in ("_keys", "_values"):
            old = getattr(self, name)
            kept = old.new_empty(len(indices), *old.shape[1:])
            kept[:, :, : self.length] = old[indices.to(old.device), :, : self.length]
            setattr(self, name, kept)
        self._views()


def nucleus(probs: torch.Tensor, top_p: float) -> torch.Tensor:
    """`probs` `[A, V]` restricted to each row's smallest set of tokens whose mass reaches top_p (the
    most likely token always kept), renormalised."""
    if top_p >= 1.0:
        return probs
    sorted_probs, order = probs.sort(dim=-1, descending=True)
    outside = sorted_probs.cumsum(dim=-1) - sorted_probs >= top_p  # mass before the token already reaches p
    kept = torch.zeros_like(probs).scatter(-1, order, sorted_probs.masked_fill(outside, 0.0))
    return kept / kept.sum(dim=-1, keepdim=True)


@torch.inference_mode()  # outputs leave as lists: nothing of it reaches autograd
def sample(
    model: torch.nn.Module,
    prompt_ids: list[list[int]],
    n: int,
    sampling: SamplingSettings,
    seed: int,
    rule: StopRule,
    decode: Callable[[list[int]], str],
    pad_id: int,
    device: torch.device,
) -> RolloutBatch:
    """`n` responses per prompt by the loop in the module docstring; deterministic for a given seed."""
    cap = sampling.max_new_tokens
    layers = extract_model_from_parallel(model).config.num_hidden_layers
    cache = Cache(layers=[_BufferLayer(max(len(p) for p in prompt_ids) + cap) for _ in range(layers)])
    logits, mask = prefill(model, prompt_ids, pad_id, device, cache)
    cache.batch_repeat_interleave(n)
    logits, mask = logits[:, -1].repeat_interleave(n, dim=0), mask.repeat_interleave(n, dim=0)
    rows = mask.shape[0]
    positions = mask.sum(1)  # position id of each row's next token
    generator = torch.Generator(device=device).manual_seed(seed)
    drawn_tokens = torch.full((rows, cap), pad_id, dtype=torch.long, device=device)
    drawn_logps, drawn_entropies = torch.zeros(rows, cap, device=device), torch.zeros(rows, cap, device=device)
    lengths = torch.zeros(rows, dtype=torch.long, device=device)
    active = torch.arange(rows, device=device)  # batch row -> response index
    finished = torch.zeros(rows, dtype=torch.bool, device=device)  # per batch row
    stops = torch.tensor(rule.token_ids, dtype=torch.long, device=device)
    for step in range(cap):
        log_probs = torch.log_softmax(logits.float() / sampling.temperature, dim=-1)
        probs = exp(log_probs)
        drawn = torch.multinomial(nucleus(probs, sampling.top_p), 1, generator=generator)  # [A, 1]
        live = active[~finished]
        drawn_tokens[live, step] = drawn[~finished, 0]
        drawn_logps[live, step] = log_probs.gather(-1, drawn).squeeze(-1)[~finished]
        drawn_entropies[live, step] = -(probs * log_probs).sum(-1)[~finished]
        lengths[live] = step + 1
        finished |= torch.isin(drawn[:, 0], stops)
        if rule.strings and (step + 1) % STRING_CHECK_EVERY == 0:
            for b in (~finished).nonzero().squeeze(-1).tolist():
                text = decode(drawn_tokens[active[b], : step + 1].tolist())
                finished[b] = any(s in text for s in rule.strings)
        if bool(finished.all()) or step + 1 == cap:
            break
        if finished.float().mean() >= COMPACT_FRACTION:
            keep = (~finished).nonzero().squeeze(-1)
            cache.batch_select_indices(keep)
            active, drawn, mask, positions, finished = [x[keep] for x in (active, drawn, mask, positions, finished)]
        mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
        logits = model(
            input_ids=drawn.masked_fill(finished[:, None], pad_id),
            attention_mask=mask,
            position_ids=positions[:, None],
            past_key_values=cache,
            use_cache=True,
            logits_to_keep=1,
        ).logits[:, -1]
        positions = positions + 1
    batch = RolloutBatch([], [], [], [], [])
    for r, (row, logp, entropy, length) in enumerate(
        zip(drawn_tokens.tolist(), drawn_logps.tolist(), drawn_entropies.tolist(), lengths.tolist(), strict=True)
    ):
        kept, reason = finish_response(row[:length], rule, decode, cap)
        batch.prompt_ids.append(list(prompt_ids[r // n]))
        batch.response_ids.append(kept)
        batch.finish_reasons.append(reason)
        batch.sampler_logprobs.append(logp[: len(kept)])
        batch.sampler_entropy.append(entropy[: len(kept)])
    return batch


class HFRollout:
    """RolloutEngine on a transformers model: the trained model itself, or its own copy in `engine_dtype`
    (module docstring)."""

    def __init__(
        self,
        model: torch.nn.Module,
        rule: StopRule,
        decode: Callable[[list[int]], str],
        pad_id: int,
        device: torch.device,
        engine_dtype: torch.dtype | None = None,
    ):
        self.rule, self.decode, self.pad_id, self.device = rule, decode, pad_id, device
        self.engine_dtype = engine_dtype
        self.samples_trained_weights = engine_dtype is None
        self.model = model if engine_dtype is None else self._copy_of(model)

    def _copy_of(self, model: torch.nn.Module) -> torch.nn.Module:
        config = extract_model_from_parallel(model).config
        return tabulate_rotary(AutoModelForCausalLM.from_config(config, dtype=self.engine_dtype)).to(self.device).eval()

    def sync_weights(self, model: torch.nn.Module) -> None:
        if self.samples_trained_weights:
            self.model = model
            return
        weights = dict(full_state_dict_items(model))
        self.model.load_state_dict({name: weights[name] for name in self.model.state_dict()}, strict=True)

    def generate(self, prompt_ids: list[list[int]], n: int, sampling: SamplingSettings, seed: int) -> RolloutBatch:
        was_training = self.model.training
        self.model.eval()
        try:
            return sample(self.model, prompt_ids, n, sampling, seed, self.rule, self.decode, self.pad_id, self.device)
        finally:
            self.model.train(was_training)

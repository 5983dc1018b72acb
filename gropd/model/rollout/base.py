"""The rollout interface every backend (transformers, vLLM) implements, and what they share:
how a response ends (StopRule) and the trainer's full weights for an engine's own copy.

Token ids travel as plain Python lists so that backends on other processes or
machines need no tensors; the trainer builds padded tensors itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from gropd.config.errors import ConfigError
from gropd.config.schema import BackendSettings

if TYPE_CHECKING:  # only full_state_dict_items computes with torch: the interface loads without it
    import torch

FINISH_REASONS = ("stop", "length")
_WRAPPER_SEGMENTS = frozenset({"module", "_orig_mod", "_fsdp_wrapped_module", "_checkpoint_wrapped_module"})


@dataclass(frozen=True)
class SamplingSettings:
    """Sampling for one generation call: temperature, nucleus top-p, response cap."""

    temperature: float
    top_p: float
    max_new_tokens: int


@dataclass(frozen=True)
class StopRule:
    """How a response of one mode ends: at the first of `token_ids` (kept as its last token), or at the
    token that completes the first occurrence of one of `strings` in its text (kept too, as vLLM keeps
    it in `token_ids`; text after that token is dropped with it)."""

    token_ids: tuple[int, ...]
    strings: tuple[str, ...] = ()


def stop_string_end(tokens: Sequence[int], decode: Callable[[list[int]], str], strings: Sequence[str]) -> int | None:
    """How many tokens of `tokens` a response keeps when a stop string occurs in its text: up to and
    including the token that completes the earliest occurrence; None when no stop string occurs."""
    if not strings or not tokens:
        return None
    text = decode(list(tokens))
    ends = [text.find(s) + len(s) for s in strings if s in text]
    if not ends:
        return None
    end = min(ends)
    low, high = 1, len(tokens)  # the shortest prefix whose text reaches `end` (prefix texts grow with length)
    while low < high:
        middle = (low + high) // 2
        if len(decode(list(tokens[:middle]))) >= end:
            high = middle
        else:
            low = middle + 1
    return low


def finish_response(
    tokens: Sequence[int], rule: StopRule, decode: Callable[[list[int]], str], max_new_tokens: int
) -> tuple[list[int], str]:
    """(the response as kept, its finish reason): cut after the first stop token or stop string
    (whichever comes first) with reason "stop", else the first max_new_tokens tokens with "length"."""
    cut = next((i + 1 for i, token in enumerate(tokens) if token in rule.token_ids), None)
    by_string = stop_string_end(tokens[:cut] if cut else tokens, decode, rule.strings)
    if by_string is not None:
        cut = by_string
    if cut is not None:
        return list(tokens[:cut]), "stop"
    return list(tokens[:max_new_tokens]), "length"


@dataclass
class RolloutBatch:
    """`n` responses for each of `P` prompts, flattened prompt-major: row i*n+j is
    response j of prompt i (the consecutive-block grouping that credit expects).

    prompt_ids[r]        the prompt's token ids (repeated for each of its n rows)
    response_ids[r]      the sampled tokens, ending with the stop token (or the stop string's last
                         token) when one was hit
    finish_reasons[r]    "stop" (a stop token or string ended it) or "length" (hit max_new_tokens)
    sampler_logprobs[r]  the sampler's own log-prob of each response token under logits / temperature,
                         or None when the backend does not report them
    sampler_entropy[r]   the entropy of that distribution at each response token, or None
    """

    prompt_ids: list[list[int]]
    response_ids: list[list[int]]
    finish_reasons: list[str]
    sampler_logprobs: list[list[float]] | None = None
    sampler_entropy: list[list[float]] | None = None


class RolloutEngine(Protocol):
    """Generates responses from the current student and follows its weights."""

    samples_trained_weights: bool  # True when generate() runs the trainer's own parameters (no copy, same dtype)

    def generate(self, prompt_ids: list[list[int]], n: int, sampling: SamplingSettings, seed: int) -> RolloutBatch:
        """Sample `n` responses for every prompt; deterministic for a given seed."""
        ...

    def sync_weights(self, model: torch.nn.Module) -> None:
        """Load the trainer's current student weights before the next generate() (a collective under FSDP:
        every rank calls it)."""
        ...


def checkpoint_name(name: str) -> str:
    """A trainer state-dict key in checkpoint form: wrapper segments (DDP, compile, FSDP1) removed."""
    return ".".join(part for part in name.split(".") if part not in _WRAPPER_SEGMENTS)


def full_state_dict_items(model: torch.nn.Module) -> Iterator[tuple[str, torch.Tensor]]:
    """(checkpoint name, full tensor) pairs of `model`, one tensor at a time: a sharded DTensor is gathered
    only when its turn comes (every rank must iterate: `full_tensor()` is a collective, in state-dict order
    on every rank), so a consumer that drops each tensor holds one at a time. A tensor tied to another
    (Qwen3's lm_head to embed_tokens) is gathered once, kept until its last name, and given under each."""
    import torch

    state = model.state_dict(keep_vars=True)
    last_name = {id(tensor): name for name, tensor in state.items()}
    tied: dict[int, torch.Tensor] = {}
    for name, tensor in state.items():
        key = id(tensor)
        full = tied.pop(key, None)
        if full is None:
            with torch.no_grad():  # not across the yield: the caller's grad mode stays its own
                full = (tensor.full_tensor() if hasattr(tensor, "full_tensor") else tensor).detach()
        if last_name[key] != name:
            tied[key] = full
        yield checkpoint_name(name), full


class PromptTooLongError(ValueError):
    """A prompt (or a teacher's prompt + response) longer than an engine's context allows; says what to set."""


def require_within(lengths: Sequence[int], limit: int, what: str, knob: str) -> None:
    """PromptTooLongError naming the first row longer than `limit` tokens, before any engine sees it."""
    over = [(row, length) for row, length in enumerate(lengths) if length > limit]
    if over:
        row, length = over[0]
        raise PromptTooLongError(
            f"{len(over)} of {len(lengths)} rows exceed {what} ({limit} tokens): row {row} has {length}. "
            f"Nothing was sent to the engine; set {knob}"
        )


def samples_a_copy(rollout: str, dtype: str, processes: int) -> bool:
    """Whether the rollout engine samples its own copy of the trained weights rather than the trained parameters
    themselves: vLLM always; transformers under several processes (FSDP shards) or a compute dtype other than the
    float32 masters (gropd/model/rollout/hf.py)."""
    return rollout != "hf" or processes > 1 or dtype != "float32"


def require_sampler_logprobs(backend: BackendSettings, processes: int) -> None:
    """ConfigError unless backend.old_logprobs can be the sampler's: only an engine that samples the trained
    float32 weights themselves gives π_S,old (samples_a_copy). Checked when a run is planned and when it starts."""
    if backend.old_logprobs == "sampler" and samples_a_copy(backend.rollout, backend.dtype, processes):
        raise ConfigError(
            "run config",
            "backend.old_logprobs",
            f"'sampler', but the rollout engine ({backend.rollout}, {backend.dtype}, {processes} process(es)) "
            "samples its own copy of the weights",
            "recompute (the sampler's log-probs are π_S,old only when it runs the trained float32 weights)",
        )

"""Credit assignment for on-policy distillation: vanilla OPD, GR-OPD, the raw score and the constant control
(docs/DESIGN.md §1).

Symbols follow the paper. For response `i` of a prompt's group of `G` and its
response token `t` (counted from 1 at the first response token), with prefix
`h_{i,t} = (x, y_{i,<t})`:

    token feedback     f_{i,t} = log π_T(y_{i,t} | h_{i,t}) − log π_S,old(y_{i,t} | h_{i,t})
    vanilla OPD        A_{i,t} = f_{i,t}
    trajectory score   S_i = Σ_{t=1..T_i} γ^(t−1) f_{i,t}
    group statistics   μ = mean_i S_i,   σ = std_i S_i
    calibrated credit  A_i = ((S_i − μ) + λ·μ) / (σ + ε)
    broadcast          A_{i,t} = A_i for every response token of response i
    raw score          A_{i,t} = S_i   (Figure 1(c, d): the trajectory score itself, no μ, no σ)
    constant           A_{i,t} = −c    (beyond the paper: a fixed negative advantage, no teacher in it)

The fifth method, `fullkl` (the exact full-vocabulary reverse KL per token), has no sampled-token
advantage: its loss is gropd/loss.py's `full_kl_loss`, not a rule here.

Shapes: `B` rows (responses), `T` token positions, `G` = `group_size`. Rows are
grouped in consecutive blocks of `G` (row `g*G + j` is response `j` of prompt `g`).
`mask` is `[B, T]`, 1 (or True) on response tokens and 0 on prompt and padding,
with padding on either side. Nothing here loops over tokens; everything runs on
whatever device the inputs live on.

Deviation from the paper (which does not discuss it): a *degenerate* group has no relative
signal: its σ is at most `sigma_floor · max(1, |μ|)` (identical responses, whose scores differ
only by float noise) or undefined (G = 1 with the Bessel-corrected std). The floor is relative
because float noise in S grows with |S| and with the forward's padding layout: identical responses
of the tiny world scored in different layouts gave σ/|μ| up to 1e-7 here and ~1e-6 in earlier runs
(σ of 1e-5–1e-4 at |S| ≈ 85), which an absolute floor of 1e-6 let through. By default a degenerate
group's advantages are 0 and it is counted (`degenerate_groups`); the rule is chosen by name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # torch is imported where tensors are computed: the record loads without it (config, reports)
    import torch

STD_CONVENTIONS = ("unbiased", "population")


@dataclass(frozen=True)
class CreditSettings:
    """Everything a credit rule may read; each rule reads its own (GR-OPD: all but `constant`; raw: γ;
    constant: c; vanilla OPD: nothing)."""

    group_size: int
    gamma: float = 1.0
    lam: float = 0.0
    eps: float = 1e-6
    std: str = "unbiased"
    sigma_floor: float = 1e-5
    degenerate: str = "zero"
    constant: float | None = None  # c of the constant rule, A_{i,t} = −c


def token_feedback(teacher_logprobs: torch.Tensor, student_logprobs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """`f_{i,t} = log π_T(y_{i,t}|h_{i,t}) − log π_S,old(y_{i,t}|h_{i,t})`, `[B, T]`.

    Exactly 0 where `mask` is 0, even if the log-probs there are -inf or NaN.
    Detached: no gradient flows through the feedback.
    """
    import torch

    diff = teacher_logprobs.detach() - student_logprobs.detach()
    return torch.where(mask.bool(), diff, torch.zeros_like(diff))


def without_format_tokens(f: torch.Tensor, mask: torch.Tensor, stopped: torch.Tensor) -> torch.Tensor:
    """`f` `[B, T]` with the feedback on each response's format tokens set to 0: its first response token,
    and its last one when a stop rule ended it (`stopped` `[B]` bool: the stop token or string, kept as the
    response's last token). Content feedback is left as it is (the cross-pattern control: experiments/TINY.md,
    round 5)."""
    import torch

    keep = mask.bool()
    position = torch.cumsum(keep.to(torch.long), dim=1)  # t on response tokens (1-based)
    first = keep & (position == 1)
    last = keep & (position == keep.sum(dim=1, keepdim=True)) & stopped.bool()[:, None]
    return torch.where(first | last, torch.zeros_like(f), f)


def trajectory_scores(f: torch.Tensor, mask: torch.Tensor, gamma: float) -> torch.Tensor:
    """`S_i = Σ_{t=1..T_i} γ^(t−1) f_{i,t}`, `[B]`.

    `t` counts the response's own tokens (mask = 1) from 1, so the same response
    gets the same score under left padding, right padding or none. `γ ∈ (0, 1]`;
    `γ = 1` is the raw sum.
    """
    import torch

    if not 0.0 < gamma <= 1.0:
        raise ValueError(f"gamma must lie in (0, 1], got {gamma}")
    keep = mask.bool()
    position = torch.cumsum(keep.to(torch.long), dim=1) - 1  # t − 1 on response tokens
    discount = torch.pow(torch.tensor(gamma, dtype=f.dtype, device=f.device), position.to(f.dtype))
    return torch.where(keep, discount * f, torch.zeros_like(f)).sum(dim=1)


def _check_grouping(S: torch.Tensor, group_size: int) -> int:
    """Validate that `S` is `[B]` with `B` divisible by `group_size`; return `B // G`."""
    if S.dim() != 1:
        raise ValueError(f"trajectory scores must be 1-D [B], got shape {tuple(S.shape)}")
    if group_size < 1:
        raise ValueError(f"group_size must be >= 1, got {group_size}")
    if S.shape[0] % group_size != 0:
        raise ValueError(
            f"batch size B={S.shape[0]} is not divisible by group_size={group_size}; "
            "rows must come in consecutive blocks of G responses per prompt"
        )
    return S.shape[0] // group_size


def group_stats(S: torch.Tensor, group_size: int, std: str = "unbiased") -> tuple[torch.Tensor, torch.Tensor]:
    """Per-group mean and std of the scores: `(μ [B//G], σ [B//G])`.

    `std="unbiased"`: `σ² = Σ_j (S_j − μ)² / (G − 1)` (Bessel, as verl and TRL);
    `std="population"`: divide by `G`. For `G = 1` the unbiased σ is undefined and
    is returned as 0 (never NaN), which `is_degenerate` always flags.
    """

    from gropd.vector_math import sqrt

    if std not in STD_CONVENTIONS:
        raise ValueError(f"unknown std convention {std!r}; valid: {', '.join(STD_CONVENTIONS)}")
    n_groups = _check_grouping(S, group_size)
    grouped = S.reshape(n_groups, group_size)
    mu = grouped.mean(dim=1)
    dof = max(group_size - 1, 1) if std == "unbiased" else group_size
    sigma = sqrt(((grouped - mu[:, None]) ** 2).sum(dim=1) / dof)
    return mu, sigma


def is_degenerate(mu: torch.Tensor, sigma: torch.Tensor, group_size: int, std: str, sigma_floor: float) -> torch.Tensor:
    """Bool `[B//G]`: True where a group (statistics μ, σ from `group_stats`) has no usable relative signal:
    `σ ≤ sigma_floor · max(1, |μ|)` (a floor relative to the group's scale: module docstring), or `G = 1`
    under the unbiased convention (σ undefined), whatever the floor."""
    import torch

    if group_size == 1 and std == "unbiased":
        return torch.ones_like(sigma, dtype=torch.bool)
    return sigma <= sigma_floor * mu.abs().clamp(min=1.0)


def _zero_degenerate(A: torch.Tensor, degenerate: torch.Tensor) -> torch.Tensor:
    """Degenerate groups get advantage 0 (no update from that prompt)."""
    import torch

    return torch.where(degenerate, torch.zeros_like(A), A)


def _keep_degenerate(A: torch.Tensor, degenerate: torch.Tensor) -> torch.Tensor:
    """Apply the formula anyway: a degenerate group gets `λ·μ / (σ + ε)`, up to `λ·μ/ε`."""
    return A


DEGENERATE_RULES: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "zero": _zero_degenerate,
    "keep": _keep_degenerate,
}


def calibrated_credit(S: torch.Tensor, settings: CreditSettings) -> tuple[torch.Tensor, torch.Tensor]:
    """Calibrated sequence credit `A_i = ((S_i − μ) + λ·μ) / (σ + ε)` `[B]` and the degenerate mask `[B//G]`.

    `μ`, `σ` are the statistics of the `G` scores of row `i`'s group (`group_stats`). `λ = 0` is purely
    relative (zero mean per group); `λ = 1` gives `S_i / (σ + ε)`. Degenerate groups (`is_degenerate`)
    follow the rule named by `settings.degenerate`: "zero" sets their advantages to 0, "keep" applies the
    formula anyway.
    """
    s = settings
    if s.degenerate not in DEGENERATE_RULES:
        raise ValueError(f"unknown degenerate-group rule {s.degenerate!r}; valid: {', '.join(DEGENERATE_RULES)}")
    if s.eps < 0:
        raise ValueError(f"eps must be >= 0, got {s.eps}")
    G = s.group_size
    mu, sigma = group_stats(S, G, s.std)
    degenerate = is_degenerate(mu, sigma, G, s.std, s.sigma_floor)
    mu_i = mu.repeat_interleave(G)
    A = ((S - mu_i) + s.lam * mu_i) / (sigma.repeat_interleave(G) + s.eps)
    A = DEGENERATE_RULES[s.degenerate](A, degenerate.repeat_interleave(G))
    return A, degenerate


def opd_advantages(f: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Vanilla OPD's sampled-token baseline `A_{i,t} = f_{i,t}`, `[B, T]`, 0 off the mask."""
    import torch

    return torch.where(mask.bool(), f, torch.zeros_like(f))


def broadcast(A: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """`A_{i,t} = A_i` on every response token of row `i`, 0 elsewhere: `[B]` → `[B, T]`."""
    import torch

    expanded = A[:, None].expand(mask.shape)
    return torch.where(mask.bool(), expanded, torch.zeros_like(expanded))


def pressure(
    S: torch.Tensor,
    group_size: int,
    lam: float,
    eps: float = 1e-6,
    std: str = "unbiased",
    sigma_floor: float = 1e-5,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Table 2's batch proxies: `P = mean_g |μ_g| / (σ_g + ε)` and retained `λ·P`.

    Returns two 0-dim tensors `(normalised, retained)`. The mean runs over the groups with
    a relative signal: a degenerate group (`is_degenerate`: σ ≤ sigma_floor · max(1, |μ|), or
    undefined) is left out, since its |μ|/(σ + ε) measures ε rather than the teacher and
    would swamp the batch (up to |μ|/ε). NaN when every group is degenerate.
    """
    if eps <= 0:
        raise ValueError(f"pressure needs eps > 0 to stay finite, got {eps}")
    mu, sigma = group_stats(S, group_size, std)
    usable = ~is_degenerate(mu, sigma, group_size, std, sigma_floor)
    normalised = (mu.abs() / (sigma + eps))[usable].mean()
    return normalised, lam * normalised


def _gropd_rule(f: torch.Tensor, mask: torch.Tensor, s: CreditSettings) -> tuple[torch.Tensor, dict[str, int]]:
    """GR-OPD: score, group-normalise, broadcast. Stats: count of degenerate groups."""
    A, degenerate = calibrated_credit(trajectory_scores(f, mask, s.gamma), s)
    return broadcast(A, mask), {"degenerate_groups": int(degenerate.sum().item())}


def _opd_rule(f: torch.Tensor, mask: torch.Tensor, s: CreditSettings) -> tuple[torch.Tensor, dict[str, int]]:
    """Vanilla OPD: `A_{i,t} = f_{i,t}`."""
    return opd_advantages(f, mask), {"degenerate_groups": 0}


def _raw_rule(f: torch.Tensor, mask: torch.Tensor, s: CreditSettings) -> tuple[torch.Tensor, dict[str, int]]:
    """Raw trajectory score: `A_{i,t} = S_i` broadcast, with no group mean and no σ (the uncalibrated
    ablation of Figure 1(c, d); with γ = 1 it is the theorem's estimator)."""
    return broadcast(trajectory_scores(f, mask, s.gamma), mask), {"degenerate_groups": 0}


def _constant_rule(f: torch.Tensor, mask: torch.Tensor, s: CreditSettings) -> tuple[torch.Tensor, dict[str, int]]:
    """Constant control (beyond the paper): `A_{i,t} = −c` on every response token, no teacher in it."""
    import torch

    if s.constant is None or not s.constant > 0:
        raise ValueError(f"the constant rule needs c > 0, got {s.constant}")
    return torch.where(mask.bool(), -s.constant, 0.0).to(f.dtype), {"degenerate_groups": 0}


CreditRule = Callable[["torch.Tensor", "torch.Tensor", CreditSettings], tuple["torch.Tensor", dict[str, int]]]


@dataclass(frozen=True)
class Method:
    """One method of `method:` in a run's config, the one record everything else reads (schema, trainer,
    pipeline, reports): adding a method is an entry here (and a loss in gropd/loss.py when it has no rule).

    role        "proposed" (GR-OPD) and "baseline" (vanilla OPD): Table 1's two methods; "ablation": the
                paper's own variant (the raw score of Figure 1(c, d)); "control": beyond the paper
    knobs       the settings it reads that tell two of its runs apart, (dotted config key, symbol): shown in
                labels, recorded in status.json, pooled over in reports
    rule        its advantage rule A_{i,t}; None: no sampled-token advantage, its loss reads the teacher's whole
                distribution at every response position (`needs_distribution`)
    first_batch_c   its c, when the config leaves it null, is the first batch's mean |f| (recorded as constant_c)
    groups      its rule reads group statistics (μ, σ over a prompt's G responses): it needs G >= 2
    """

    name: str
    label: str
    role: str
    knobs: tuple[tuple[str, str], ...] = ()
    rule: CreditRule | None = None
    first_batch_c: bool = False
    groups: bool = False

    @property
    def needs_distribution(self) -> bool:
        return self.rule is None

    @property
    def in_paper(self) -> bool:
        return self.role != "control"

    def reads(self, key: str) -> bool:
        """Whether `key` (dotted, e.g. "gropd.lam") is one of its knobs."""
        return any(knob == key for knob, _ in self.knobs)


METHODS: dict[str, Method] = {
    m.name: m
    for m in (
        Method("gropd", "GR-OPD", "proposed", (("gropd.lam", "λ"), ("gropd.gamma", "γ")), _gropd_rule, groups=True),
        Method("opd", "vanilla OPD", "baseline", (), _opd_rule),
        Method("raw", "raw score", "ablation", (("gropd.gamma", "γ"),), _raw_rule),
        Method(
            "constant", "constant advantage, beyond the paper", "control", (("constant.c", "c"),), _constant_rule, True
        ),
        Method("fullkl", "full-vocabulary KL, beyond the paper", "control"),
    )
}
CREDIT_RULES: dict[str, CreditRule] = {name: m.rule for name, m in METHODS.items() if m.rule is not None}
PROPOSED, BASELINE = (next(n for n, m in METHODS.items() if m.role == role) for role in ("proposed", "baseline"))


def method(name: str) -> Method:
    """The record of method `name`; ValueError listing the valid ones when there is none."""
    if name not in METHODS:
        raise ValueError(f"unknown method {name!r}; valid: {', '.join(METHODS)}")
    return METHODS[name]


def token_advantages(
    name: str, f: torch.Tensor, mask: torch.Tensor, settings: CreditSettings
) -> tuple[torch.Tensor, dict[str, int]]:
    """Per-token advantages `[B, T]` and stats `{"degenerate_groups": int}` by method name.

    `name` is a method with a rule (CREDIT_RULES); every rule reads what it needs from one `CreditSettings`.
    """
    if name not in CREDIT_RULES:
        raise ValueError(f"unknown credit method {name!r}; valid: {', '.join(CREDIT_RULES)}")
    return CREDIT_RULES[name](f, mask, settings)

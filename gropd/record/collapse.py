"""When a run has collapsed (docs/DESIGN.md §1): non-finite numbers, or the run's YAML rule firing.

Decided from the metrics history alone, so a resumed run decides exactly as an uninterrupted one, and a reader of
the run's record decides as its trainer did (RunDir.record_problem: a status "collapsed" the metrics do not bear
out is a broken record). Verifier reward is a monitor here, never part of the objective.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from gropd.config.schema import CollapseRule
from gropd.record.ranges import NON_FINITE

FINITE_KEYS = ("loss", "grad_norm", "mean_advantage_abs", "kl_mean")  # every update's; the advantage methods' |A|;
# fullkl's mean KL. Each where a record has it (a training record always holds loss and grad_norm: null when NaN or
# infinite); a record without one (a reader's fixture, a scoring pass) has nothing non-finite in it


def collapse_reason(history: list[dict[str, Any]], rule: CollapseRule) -> str | None:
    """A sentence saying why the run has collapsed at its last step, or None.

    Reward rule: with m_s the `reward_window`-step trailing moving average of
    `verifier_reward` and m_0 its first full-window value, collapsed when
    m_s < reward_fraction · m_0 for `reward_patience` consecutive steps (never fires when m_0 = 0).
    Length rule: `frac_at_len_cap` >= len_cap_fraction for `len_cap_patience` consecutive steps.
    """
    last = history[-1]
    for key in (key for key in FINITE_KEYS if key in last):
        value = last.get(key)
        if value is None or not math.isfinite(value):  # None: non-finite, as metrics records write it (strict_record)
            shown = (last.get(NON_FINITE) or {}).get(key, "nan") if value is None else value
            return f"non-finite {key} ({shown}) at step {last['step']}"
    rewards, window = [record["verifier_reward"] for record in history], rule.reward_window
    averages = [sum(rewards[i - window : i]) / window for i in range(window, len(rewards) + 1)]
    if averages and averages[0] > 0:
        floor = rule.reward_fraction * averages[0]
        if _run_length(averages, lambda m: m < floor) >= rule.reward_patience:
            return (
                f"verifier-reward moving average below {rule.reward_fraction:g} x its start "
                f"({averages[0]:.3f}) for {rule.reward_patience} steps"
            )
    capped = [record["frac_at_len_cap"] for record in history]
    if _run_length(capped, lambda x: x >= rule.len_cap_fraction) >= rule.len_cap_patience:
        return f"{rule.len_cap_fraction:.0%} or more of responses at the length cap for {rule.len_cap_patience} steps"
    return None


def _run_length(values: list[float], condition: Callable[[float], bool]) -> int:
    """How many values at the end of the list satisfy `condition` in a row."""
    return next((i for i, value in enumerate(reversed(values)) if not condition(value)), len(values))

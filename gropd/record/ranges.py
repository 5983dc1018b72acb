"""A run's numbers within their ranges: what makes an evaluation summary, a J_H curve or a finished run's step count
impossible. A record that fails is broken (RunDir.record_problem): a named missing run, never a table cell or a
verdict.

    eval/summary.json   each suite's avg_at_k, pass_at_k and maj_at_k a number in [0, 100] where present, k a
                        positive integer, questions and timeouts non-negative integers, mean_tokens >= 0; every suite
                        the run's config names (eval.suites) present
                        a suite's questions equal to eval.questions (when the config sets a count; all of a pool
                        otherwise, which only the pool knows) and its k to the K the run was given (eval.k, else
                        the suite's manifest K)
    horizon.json        one value per horizon, each an AUC in [0, 1] (or values null: no informative prompt);
                        informative prompts a count at most its prompts, the mean reward in [0, 1]
    metrics.jsonl       each number of METRIC_RANGES within the range its definition allows (null: undefined that
                        batch, as a correlation of a constant side); a non-finite number (a NaN or infinity the
                        record holds, or one it flags in `non_finite`) only on a collapsed run's collapse step
"""

from __future__ import annotations

import math
from typing import Any

PERCENTS = ("avg_at_k", "pass_at_k", "maj_at_k")
COUNTS = ("questions", "timeouts")
INF = math.inf

# metric -> (least, most, why): a bound is a number or the dotted config key whose value it is. Only what a
# metric's definition bounds (gropd/train/step.py: rollout_metrics, train_step; gropd/loss.py); a metric not named
# here (loss, mean_feedback, mean_score, approx_kl, kl_mean, constant_c, memory) has no range of its own.
METRIC_RANGES: dict[str, tuple[float | str, float | str, str]] = {
    "verifier_reward": (0, 1, "a mean of 0/1 verdicts"),
    "frac_at_len_cap": (0, 1, "a fraction of the batch's responses"),
    "clip_frac": (0, 1, "a fraction of the response tokens"),
    "mean_response_len": (0, "sampling.max_new_tokens", "no response is longer than the cap"),
    "pearson_score_len": (-1, 1, "a correlation"),
    "spearman_score_reward": (-1, 1, "a correlation"),
    "degenerate_groups": (0, "train.prompts_per_batch", "a count of the batch's groups"),
    "entropy": (0, INF, "an entropy"),
    "mean_abs_feedback": (0, INF, "a mean of absolute values"),
    "mean_advantage_abs": (0, INF, "a mean of absolute values"),
    "grad_norm": (0, INF, "a norm"),
    "ratio_mean": (0, INF, "a mean of probability ratios"),
    "pressure_normalised": (0, INF, "a mean of |mu| / (sigma + eps)"),
    "pressure_retained": (0, INF, "lambda >= 0 times the normalised pressure"),
    "sampler_logprob_gap": (0, INF, "a mean of absolute differences"),
    "lr": (0, "train.optimizer.lr", "the base lr times a schedule factor in [0, 1]"),
    "logprob_forwards_min": (0, "logprob_forwards_max", "the fewest forwards of a rank, at most the most"),
    "time_rollout_s": (0, INF, "a duration"),
    "time_teacher_s": (0, INF, "a duration"),
    "time_update_s": (0, INF, "a duration"),
}
NON_FINITE = "non_finite"  # a metrics record's {key: "nan" | "inf" | "-inf"} of the numbers it holds as null


def _real(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _count(value: Any, least: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


def suite_problem(name: str, record: Any) -> str | None:
    """Why one suite's summary record is impossible (None when it is not)."""
    if not isinstance(record, dict):
        return f"suite {name} is not a record"
    for key in PERCENTS:
        if key in record and record[key] is not None and not (_real(record[key]) and 0 <= record[key] <= 100):
            return f"suite {name}: {key} {record[key]!r} is not a percentage in [0, 100]"
    if "k" in record and not _count(record["k"], 1):
        return f"suite {name}: k {record['k']!r} is not a positive integer"
    for key in COUNTS:
        if record.get(key) is not None and not _count(record[key], 0):
            return f"suite {name}: {key} {record[key]!r} is not a count"
    tokens = record.get("mean_tokens")
    if tokens is not None and not (_real(tokens) and tokens >= 0):
        return f"suite {name}: mean_tokens {tokens!r} is not a length"
    return None


def summary_problem(summary: Any, config: dict[str, Any], ks: dict[str, int] | None = None) -> str | None:
    """Why eval/summary.json cannot be believed (None when it can; an absent or suite-less summary is the reader's
    own Missing line, not a broken record); `ks`: planned_k of the run (None: K not compared)."""
    if not isinstance(summary, dict) or not isinstance(summary.get("suites"), dict) or not summary["suites"]:
        return None
    suites = summary["suites"]
    questions = (config.get("eval") or {}).get("questions")
    for name, record in suites.items():
        if problem := suite_problem(name, record):
            return f"eval/summary.json, {problem}"
        if isinstance(questions, int) and record.get("questions") != questions:
            found = record.get("questions")
            return f"eval/summary.json, suite {name}: {found} questions, but eval.questions is {questions}"
        if ks is not None and ks.get(name) is not None and record.get("k") != ks[name]:
            return f"eval/summary.json, suite {name}: k {record.get('k')!r}, but the run's K is {ks[name]}"
    named = (config.get("eval") or {}).get("suites")
    if isinstance(named, list) and (absent := [name for name in named if name not in suites]):
        return f"eval/summary.json has no record of suite {', '.join(map(str, absent))} (eval.suites names it)"
    return None


def horizon_problem(horizon: Any) -> str | None:
    """Why horizon.json cannot be believed (None when it can)."""
    if not isinstance(horizon, dict):
        return None
    horizons, values = horizon.get("horizons"), horizon.get("values")
    informative, prompts, reward = (horizon.get(key) for key in ("informative", "prompts", "reward"))
    if not _count(prompts, 0) or not _count(informative, 0) or informative > prompts:
        return f"horizon.json: {informative!r} informative prompts of {prompts!r} is not a count of a count"
    if reward is not None and not (_real(reward) and 0 <= reward <= 1):
        return f"horizon.json: mean reward {reward!r} is not a mean of 0/1 verdicts in [0, 1]"
    if values is None:  # no informative prompt: J_H undefined at every horizon (gropd.horizon.separation_curve)
        return None
    if not isinstance(horizons, list) or not isinstance(values, list) or len(horizons) != len(values):
        return "horizon.json does not hold one value per horizon"
    for at, value in zip(horizons, values, strict=True):
        if not (_real(value) and 0 <= value <= 1):
            return f"horizon.json: J_H {value!r} at horizon {at} is not an AUC in [0, 1]"
    return None


def strict_record(record: dict[str, Any]) -> dict[str, Any]:
    """`record` as strict JSON can hold it: each non-finite float null, named with its value under NON_FINITE
    ({"loss": "inf"}); a record of finite numbers is returned as it is (no NON_FINITE key, every number's bits)."""
    flagged = {
        key: str(value) for key, value in record.items() if isinstance(value, float) and not math.isfinite(value)
    }
    if not flagged:
        return record
    return {**{key: None if key in flagged else value for key, value in record.items()}, NON_FINITE: flagged}


def _bound(bound: float | str, config: dict[str, Any], record: dict[str, Any]) -> Any:
    """A METRIC_RANGES bound's value: the number, the record's own key, or the dotted config key's value."""
    if not isinstance(bound, str):
        return bound
    if bound in record:
        return record[bound]
    value: Any = config
    for part in bound.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def non_finite(record: dict[str, Any]) -> list[str]:
    """The keys of a metrics record whose number is not finite: held as NaN or infinity (a file written before
    records said so) or as null with the record's NON_FINITE flag."""
    flagged = record.get(NON_FINITE)
    held = [key for key, value in record.items() if isinstance(value, float) and not math.isfinite(value)]
    return sorted({*held, *(flagged if isinstance(flagged, dict) else {})})


def metric_problem(record: dict[str, Any], config: dict[str, Any]) -> str | None:
    """Why one metrics record holds an impossible number (None when it does not): a METRIC_RANGES value outside
    its range (a non-finite one is non_finite's, not this)."""
    for key, (least, most, why) in METRIC_RANGES.items():
        value = record.get(key)
        if value is None or key in non_finite(record):
            continue
        low, high = _bound(least, config, record), _bound(most, config, record)
        if not _real(value) or (_real(low) and value < low) or (_real(high) and value > high):
            shown = f"[{low}, {high}]".replace("inf", "∞")
            return f"step {record.get('step')}: {key} {value!r} is outside {shown} ({why})"
    return None


def metrics_problem(metrics: list[dict[str, Any]], config: dict[str, Any], collapsed: bool) -> str | None:
    """Why a run's metrics.jsonl cannot be believed (None when it can): a record out of METRIC_RANGES, or a
    non-finite number anywhere but a collapsed run's last (collapse) step."""
    for index, record in enumerate(metrics):
        if (keys := non_finite(record)) and not (collapsed and index == len(metrics) - 1):
            where = "before its collapse step" if collapsed else "in a run that did not collapse"
            return f"metrics.jsonl step {record.get('step')}: non-finite {', '.join(keys)} {where}"
        if problem := metric_problem(record, config):
            return f"metrics.jsonl {problem}"
    return None


def planned_k(config: dict[str, Any], suites: dict[str, Any]) -> dict[str, int]:
    """Suite -> the K an evaluation of this config samples: eval.k's, else the suite manifest's (`suites`: the
    profile's records of experiments/suites.yaml)."""
    given = (config.get("eval") or {}).get("k") or {}
    return {name: given.get(name, (record or {}).get("k")) for name, record in suites.items()}

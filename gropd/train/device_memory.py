"""Peak device memory of each phase of a step: the most memory torch's allocator held on the GPU since the
previous reading (GiB), after which the peak restarts from what is held now. A CPU keeps no such count: None.
Reads and resets host-side counters only (no synchronisation).

A phase's peak counts everything the process holds, the engines too (a vLLM engine's weights and KV cache, a
transformers sampler's copy, an in-process teacher: ~56 GiB of an 80 GB card in the paper profile), so the
trainer's own peak is the update's peak less what the engines held once built (`engines_gib`, measured around
their construction; they hold it for the whole run):

    memory_trainer_gib = memory_update_gib − engines_gib

logged beside gropd/model/fit.py's estimate for the same shapes (`memory_trainer_estimate_gib`), which a check
holds it to: measured ≤ estimate · (1 + MEMORY_MARGIN) (`over_estimate`; benchmarks/trainer_rehearsal.py)."""

from __future__ import annotations

import torch

MEMORY_MARGIN = 0.10  # fit.py's formulas are ours: its trainer estimate may be exceeded by this share, not more


def phase_peak_gib(device: torch.device) -> float | None:
    """max_memory_allocated(device) since the last call, in GiB, then reset_peak_memory_stats; None off CUDA."""
    if device.type != "cuda":
        return None
    peak = torch.cuda.max_memory_allocated(device) / 2**30
    torch.cuda.reset_peak_memory_stats(device)
    return peak


def held_gib(device: torch.device) -> float | None:
    """memory_allocated(device) now, in GiB; None off CUDA."""
    return torch.cuda.memory_allocated(device) / 2**30 if device.type == "cuda" else None


def memory_metrics(
    peaks: dict[str, float | None], engines_gib: float | None = None, estimate_gib: float | None = None
) -> dict[str, float]:
    """`memory_<phase>_gib` for each phase measured (none on a CPU, so a CPU run's records keep their keys), and
    where the update's peak and the engines' memory are known, `memory_trainer_gib` (module docstring) beside
    `memory_trainer_estimate_gib`."""
    metrics = {f"memory_{phase}_gib": gib for phase, gib in peaks.items() if gib is not None}
    if peaks.get("update") is not None and engines_gib is not None:
        metrics["memory_trainer_gib"] = peaks["update"] - engines_gib
        if estimate_gib is not None:
            metrics["memory_trainer_estimate_gib"] = estimate_gib
    return metrics


def over_estimate(measured_gib: float, estimate_gib: float, margin: float = MEMORY_MARGIN) -> str | None:
    """A line saying by how much the trainer's measured peak passes fit.py's estimate with its margin; None when
    measured ≤ estimate · (1 + margin)."""
    limit = estimate_gib * (1 + margin)
    if measured_gib <= limit:
        return None
    return (
        f"the trainer's peak {measured_gib:.2f} GiB (engines excluded) exceeds gropd/model/fit.py's estimate "
        f"{estimate_gib:.2f} GiB by {(measured_gib / estimate_gib - 1) * 100:.0f}% (allowed: {margin * 100:.0f}%, "
        f"{limit:.2f} GiB): fit.py's trainer formulas undercount this run's memory"
    )

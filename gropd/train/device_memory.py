"""Peak device memory of each phase of a step: the most memory torch's allocator held on the GPU since the
previous reading (GiB), after which the peak restarts from what is held now. A CPU keeps no such count: None.
Reads and resets host-side counters only (no synchronisation)."""

from __future__ import annotations

import torch


def phase_peak_gib(device: torch.device) -> float | None:
    """max_memory_allocated(device) since the last call, in GiB, then reset_peak_memory_stats; None off CUDA."""
    if device.type != "cuda":
        return None
    peak = torch.cuda.max_memory_allocated(device) / 2**30
    torch.cuda.reset_peak_memory_stats(device)
    return peak


def memory_metrics(peaks: dict[str, float | None]) -> dict[str, float]:
    """`memory_<phase>_gib` for each phase measured (none on a CPU, so a CPU run's records keep their keys)."""
    return {f"memory_{phase}_gib": gib for phase, gib in peaks.items() if gib is not None}

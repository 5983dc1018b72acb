"""The nodes of a multi-node job meet once in its check, before anything loads: a gloo rendezvous at the address
the job's launcher will use, an all-reduce across every node, and the run locks' coherence across nodes.

Lock coherence: the run locks (gropd/record/run_lock.py) keep one writer per run only where an flock taken on one
node is seen by the others (NFSv4, GPFS, Lustre with `-o flock`); with node-local flock (Lustre `-o localflock`,
BeeGFS's default) two nodes can both hold a run's lock. Node 0 takes an flock on a probe file under the results
directory's locks and holds it while every other node tries the same file without waiting: each must find it held.

Run by `./reproduce.sh check` (gropd/runs/preflight_env.py) on every node of the step, where the job sets
GROPD_RENDEZVOUS=<first node>:<port> (experiments/launch/slurm_run.sbatch) and Slurm SLURM_PROCID / SLURM_NTASKS.
"""

from __future__ import annotations

import datetime
import fcntl
import os
from collections.abc import Mapping
from pathlib import Path

RENDEZVOUS = "GROPD_RENDEZVOUS"
MEET_TIMEOUT_S = 120


def ranks(environ: Mapping[str, str]) -> tuple[str, int, int] | None:
    """(rendezvous host:port, this node's rank, the node count) of a multi-node check, None on one node."""
    where, world = environ.get(RENDEZVOUS), int(environ.get("SLURM_NTASKS", "1") or 1)
    return (where, int(environ.get("SLURM_PROCID", "0") or 0), world) if where and world > 1 else None


def meet(where: str, rank: int, world: int, probe: Path) -> tuple[str | None, int]:
    """(why the nodes could not meet, None when they did; how many other nodes also took node 0's held flock on
    `probe`). Every node calls it at once; node 0 makes the probe file."""
    import torch
    import torch.distributed as dist

    try:
        dist.init_process_group(
            "gloo",
            init_method=f"tcp://{where}",
            rank=rank,
            world_size=world,
            timeout=datetime.timedelta(seconds=MEET_TIMEOUT_S),
        )
    except Exception as err:  # noqa: BLE001 - any failure to meet is the finding
        return f"{type(err).__name__}: {err}", 0
    try:
        count = torch.ones(1)
        dist.all_reduce(count)
        if int(count.item()) != world:
            return f"an all-reduce over {world} nodes summed {int(count.item())}", 0
        fd = None
        if rank == 0:
            probe.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(probe, os.O_RDWR | os.O_CREAT, 0o644)
            fcntl.flock(fd, fcntl.LOCK_EX)
        dist.barrier()
        also_held = torch.zeros(1)
        if rank:
            fd = os.open(probe, os.O_RDWR)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                also_held += 1  # node-local flock: this node holds what node 0 holds
            except BlockingIOError:
                pass
        dist.all_reduce(also_held)
        dist.barrier()
        if fd is not None:
            os.close(fd)  # (closing drops the flock)
        return None, int(also_held.item())
    finally:
        dist.destroy_process_group()

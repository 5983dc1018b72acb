"""An evaluation split over processes (shards): which chunks each one samples, where it writes, and how
rank 0 merges them into the suite files.

Chunk c of a suite (runner.chunks: `batch_prompts` consecutive questions, sampled with one call seeded
chunk_seed(seed, suite, c)) is always sampled whole, by one shard, so no record depends on the number
of shards. The chunks go to shards by cost, largest first, each to the least-loaded shard (ties to the
lowest rank). A chunk's cost is the tokens it is expected to generate: questions × K × the suite's
`expected_tokens` (suites.yaml: an estimate of its mean response length; a suite without one counts 1 token
a sample, so give every suite of a profile one or none). Long suites (AIME, AMC: K = 32 and long responses)
then start first on shards of their own instead of setting the tail while other GPUs idle. The estimate
steers only who samples what, never a record.

    1 shard    writes out_dir/<suite>.jsonl itself
    W shards   shard r appends to out_dir/shards/<suite>.<r>.jsonl, then writes out_dir/shards/done.<r>of<W>
               once its chunks are on disk; rank 0 waits for every other shard's mark, samples whatever
               is still missing, and merges

Merging writes <suite>.jsonl with every question's K records in suite order (as one shard leaves it
after an uninterrupted run), then removes shards/. A shard reads the records of every file of its
suite (the suite file, each shard's, an earlier shard count's too) and samples only the chunks that
still miss questions, so an interrupted evaluation resumes on any number of shards.
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

from fileio import atomic_write_text

SHARDS_DIR = "shards"
POLL_S = 2.0


def assign_chunks(costs: list[int], world: int) -> list[int]:
    """The shard of each chunk, given each chunk's cost (module docstring)."""
    loads, owners = [0] * world, [0] * len(costs)
    for chunk in sorted(range(len(costs)), key=lambda c: -costs[c]):
        owners[chunk] = loads.index(min(loads))
        loads[owners[chunk]] += costs[chunk]
    return owners


def part_path(out_dir: Path, suite: str, rank: int, world: int) -> Path:
    """The file shard `rank` of `world` appends its records of `suite` to."""
    return out_dir / f"{suite}.jsonl" if world == 1 else out_dir / SHARDS_DIR / f"{suite}.{rank}.jsonl"


def suite_files(out_dir: Path, suite: str) -> list[Path]:
    """Every file that may hold records of `suite`: the suite file and any shard's."""
    shards = [p for p in (out_dir / SHARDS_DIR).glob("*.jsonl") if p.name.rsplit(".", 2)[0] == suite]
    return [out_dir / f"{suite}.jsonl", *sorted(shards)]


def mark_done(out_dir: Path, rank: int, world: int) -> None:
    atomic_write_text(out_dir / SHARDS_DIR / f"done.{rank}of{world}", "")


class ShardLostError(RuntimeError):
    """A shard ended without marking its chunks done: rank 0 would wait for it for ever."""


def wait_for_shards(
    out_dir: Path,
    world: int,
    say_every_s: float = 60.0,
    lost: Callable[[int], str | None] = lambda rank: None,
    on_poll: Callable[[], None] = lambda: None,
) -> None:
    """Return once shards 1 .. world-1 have all marked their chunks done. `lost(rank)` says why shard `rank` has
    ended (None while it may still come): a shard that died on another node (whose launcher rank 0's does not
    watch) or left on an error stops the wait with ShardLostError, at once, not at the job's time limit.
    `on_poll()` on each look (rank 0 waiting is not hung: a hung shard's own watchdog ends it)."""
    marks = {rank: out_dir / SHARDS_DIR / f"done.{rank}of{world}" for rank in range(1, world)}
    said = started = time.monotonic()
    while missing := [mark.name for mark in marks.values() if not mark.exists()]:
        for rank, mark in marks.items():
            if not mark.exists() and (why := lost(rank)) and not mark.exists():  # (marked, then released)
                raise ShardLostError(
                    f"shard {rank} of {world} ended without marking its chunks done ({why}): rank 0 stops "
                    "waiting; evaluate again (every shard resumes from the records on disk)"
                )
        if time.monotonic() - said >= say_every_s:
            waited = time.monotonic() - started
            print(f"[eval] rank 0 waits for {', '.join(missing)} ({waited:.0f} s)", file=sys.stderr, flush=True)
            said = time.monotonic()
        on_poll()
        time.sleep(POLL_S)


def remove_shards(out_dir: Path) -> None:
    shutil.rmtree(out_dir / SHARDS_DIR, ignore_errors=True)

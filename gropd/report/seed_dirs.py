"""Which seeds beyond its grid's own a grid has under results/<profile>/ (`--seeds N` writes <entry>__seed<N>/), read
from the directory names; a stray name is never a seed."""

from __future__ import annotations

import re
import sys
from pathlib import Path

SEED_TAIL = re.compile(r"[1-9][0-9]*")  # _run_id's `__seed<N>`: N >= 1 in plain digits (seed 0 has no tail)


def seeds_on_disk(profile_results: Path, grid: str, own: set[int]) -> set[int]:
    """The seeds N of `grid`'s `<grid>__*__seed<N>` run directories that hold a status.json (a run wrote them). Any
    other such entry is ignored with a note on stderr naming it: a tail that is not a seed (`__seed²`, `__seed007`)
    or a directory no run wrote (an empty `__seed99999999999`). Seeds in `own` (the grid's) are read in any case."""
    seeds = set()
    for path in sorted(profile_results.glob(f"{grid}__*__seed*")):
        tail = path.name.rsplit("__seed", 1)[1]
        if not SEED_TAIL.fullmatch(tail):
            why = f"{tail!r} is not a seed (expected a whole number >= 1 in plain digits)"
        elif int(tail) in own:
            continue
        elif not (path / "status.json").is_file():
            why = "no status.json in it: no run wrote it"
        else:
            seeds.add(int(tail))
            continue
        print(f"note: {path}: not a run of grid {grid} ({why}); ignored", file=sys.stderr)
    return seeds

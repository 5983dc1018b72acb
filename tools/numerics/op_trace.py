"""Trace every ATen op of a tiny run's first training step in the portable numerics mode: op name, call index,
and a hash of each tensor it returns. Two machines that give different bits for the run differ first at one op
call; `--compare A B` names it (and the ops before it that fed it).

    python tools/numerics/op_trace.py RUN_ID OUT.json.gz        # from the project's root, with its .venv python
    python tools/numerics/op_trace.py --compare amd.json.gz intel.json.gz

RUN_ID is a committed reference run (results/reference/tiny/RUN_ID); the run is made under a scratch results
directory and stopped after its first step's metrics line."""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path


def compare(a: str, b: str) -> int:
    A = json.load(gzip.open(a))
    B = json.load(gzip.open(b))
    print(f"A: {A['machine']}\nB: {B['machine']}")
    for i, (x, y) in enumerate(zip(A["calls"], B["calls"], strict=False)):
        if x != y:
            print(f"first difference at call {i} of {len(A['calls'])}/{len(B['calls'])}: A {x} · B {y}")
            seen = {}
            for op, _ in A["calls"][i:]:
                seen[op] = seen.get(op, 0) + 1
            ops_differing = {}
            for (xo, xh), (yo, yh) in zip(A["calls"][i:], B["calls"][i:], strict=False):
                if xo == yo and xh != yh:
                    ops_differing[xo] = ops_differing.get(xo, 0) + 1
            most = dict(sorted(ops_differing.items(), key=lambda kv: -kv[1])[:15])
            print("ops whose outputs differ after it (op: count):", most)
            return 1
    same = len(A["calls"]) == len(B["calls"])
    print(f"identical: {len(A['calls'])} op calls" if same else "prefix identical, lengths differ")
    return 0


def trace(run_id: str, out: str) -> int:
    sys.path.insert(0, os.getcwd())  # the project whose root this runs from, not an installed copy
    from gropd.numerics import enter, machine_record

    enter("portable")
    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    # ops that allocate without writing, or only view: their bytes are whatever memory held (not hashed)
    unhashed = {
        "empty",
        "empty_like",
        "new_empty",
        "empty_strided",
        "new_empty_strided",
        "slice",
        "view",
        "select",
        "transpose",
        "t",
        "unsqueeze",
        "squeeze",
        "expand",
        "alias",
        "as_strided",
        "_unsafe_view",
        "reshape",
        "detach",
        "permute",
        "split",
        "split_with_sizes",
        "chunk",
        "unbind",
        "narrow",
        "_reshape_alias",
        "lift_fresh",
        "set_",
        "resize_",
    }
    scratch = Path(tempfile.mkdtemp(prefix="optrace-"))
    metrics = scratch / "tiny" / run_id / "metrics.jsonl"
    calls: list[tuple[str, str]] = []

    class Stop(BaseException):
        pass

    class Trace(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            result = func(*args, **(kwargs or {}))
            name = str(func.overloadpacket.__name__)
            if name in unhashed:
                calls.append((name, ""))
                return result
            digest = hashlib.sha1()
            for leaf in tree_flatten(result)[0]:
                if isinstance(leaf, torch.Tensor) and leaf.device.type == "cpu" and not leaf.is_sparse:
                    flat = leaf.detach().contiguous().view(-1)
                    digest.update(flat.view(torch.uint8).numpy().tobytes() if flat.numel() else b"")
                elif isinstance(leaf, (bool, int, float)):
                    digest.update(repr(leaf).encode())
            calls.append((name, digest.hexdigest()[:12]))
            if len(calls) % 2000 == 0 and metrics.exists() and metrics.read_text().strip():
                raise Stop
            return result

    from gropd import cli

    try:
        with Trace():
            cli.main(["--results", str(scratch), "run", run_id, "--profile", "tiny"])
    except Stop:
        pass
    first = metrics.read_text().splitlines()[0] if metrics.exists() else None
    record = {"machine": machine_record("portable", 1), "run": run_id, "first_metrics": first, "calls": calls}
    with gzip.open(out, "wt") as handle:
        json.dump(record, handle)
    print(f"{len(calls)} op calls traced; step 1: {first}")
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "--compare":
        sys.exit(compare(sys.argv[2], sys.argv[3]))
    sys.exit(trace(sys.argv[1], sys.argv[2]))

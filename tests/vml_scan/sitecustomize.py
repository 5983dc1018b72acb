"""Started by Python in every process whose PYTHONPATH holds this folder and whose environment names
GROPD_VML_SCAN (a directory): records each ATen op the process calls on a float CPU tensor, under a dispatch mode
(below autograd: forward, backward and optimiser ops alike), and writes `<pid>.json` there at exit. The environment
must already hold the numerics mode (gropd/numerics.py), since torch loads here first. tests/test_vector_math.py
reads the files."""

import os

if os.environ.get("GROPD_VML_SCAN"):
    import atexit
    import json
    import sys
    from collections import Counter
    from pathlib import Path

    import torch
    from torch.utils._python_dispatch import TorchDispatchMode
    from torch.utils._pytree import tree_flatten

    FLOATS = (torch.float32, torch.float64)
    calls: Counter = Counter()
    scalars: Counter = Counter()  # (op, scalar argument) for pow, whose exponent decides its kernel

    class Scan(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            leaves = tree_flatten((args, kwargs or {}))[0]
            if any(isinstance(t, torch.Tensor) and t.device.type == "cpu" and t.dtype in FLOATS for t in leaves):
                name = func.overloadpacket.__name__
                calls[name] += 1
                if name.startswith("pow"):
                    scalars[f"{name}({', '.join(repr(a) for a in leaves if isinstance(a, (int, float)))})"] += 1
            return func(*args, **(kwargs or {}))

    Scan().__enter__()

    def _write() -> None:
        out = Path(os.environ["GROPD_VML_SCAN"]) / f"{os.getpid()}.json"
        record = {"argv": sys.argv, "calls": dict(calls), "pow": dict(scalars)}
        out.write_text(json.dumps(record, indent=1, sort_keys=True))

    atexit.register(_write)

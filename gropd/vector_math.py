"""exp and sqrt as a computation may take them: through torch's own functions, or, in the portable numerics mode,
through routes that never reach MKL's vector math (VML).

On a CPU, PyTorch sends float32/float64 exp, log, sqrt, sin, cos, tan, tanh, erf, erfc, erfinv, log2, log10,
acos, asin, atan and trunc (and logsumexp, pow(x, 0.5), which call them) to MKL's VML
(aten/src/ATen/cpu/vml.h; measured call by call with breakpoints on MKL's symbols: tools/vml_calls.py). On an AMD
CPU MKL_CBWR does not reach VML, and its sqrt is not IEEE-rounded there, so a run's bits would depend on the CPU's
vendor. The routes taken instead, each of ATen's own kernels (identical code on every x86-64 CPU at
ATEN_CPU_CAPABILITY=default, where they call glibc's libm or an IEEE instruction):

    exp(x)  = 2^(x · log2 e)    ATen's exp2 (glibc's exp2f)
    sqrt(x) = 1 / rsqrt(x)      ATen's rsqrt (an IEEE square root, then a division); sqrt(0) = 1/inf = 0

AdamW's sqrt(v) is the optimiser's: such a process takes torch's fused CPU AdamW, whose kernel computes it with
ATen's own vectorised sqrt (gropd/train/loop.py make_optimizer), and a Qwen3 model's rotary cos/sin come from a
table (gropd/model/rotary_table.py).

The route is part of the process's numerics mode, like MKL_CBWR: `GROPD_VECTOR_MATH=aten` takes the routes above,
unset (or `vml`) torch's own functions. It is read once, when this module is imported; gropd/numerics.py puts it in
the environment with the mode's other variables, before torch loads."""

from __future__ import annotations

import math
import os

import torch

ROUTES = ("vml", "aten")
ROUTE = os.environ.get("GROPD_VECTOR_MATH") or "vml"
if ROUTE not in ROUTES:
    raise ValueError(f"GROPD_VECTOR_MATH={ROUTE!r} (expected one of {', '.join(ROUTES)}, or unset)")
VML_FREE = ROUTE == "aten"
LOG2_E = 1.0 / math.log(2.0)


def exp(x: torch.Tensor) -> torch.Tensor:
    """e^x, a new tensor (differentiable): `exp2(x · log2 e)` in a VML-free process, else `torch.exp`."""
    return torch.exp2(x * LOG2_E) if VML_FREE else torch.exp(x)


def sqrt(x: torch.Tensor) -> torch.Tensor:
    """√x for x ≥ 0, a new tensor (differentiable where x > 0): `1 / rsqrt(x)` in a VML-free process, else
    `torch.sqrt`."""
    return torch.reciprocal(torch.rsqrt(x)) if VML_FREE else torch.sqrt(x)

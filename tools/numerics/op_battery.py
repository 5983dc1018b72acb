"""Which CPU kernels give different bits on two machines, op by op, under one pin set (the portable mode's, or a
candidate's).

Each entry computes one op (or one candidate replacement for an op) on fixed inputs (torch's CPU generator gives
the same inputs on every machine) and records a hash of its output. Run it on two machines and compare:

    .venv/bin/python tools/numerics/op_battery.py [--pins avx2] > mine.json            # from the project's root
    .venv/bin/python tools/numerics/op_battery.py --compare tools/numerics/amd-epyc-zen4.ops.json mine.json

The first 87 entries are ../shared/numerics/op_battery.py's, unchanged, so that its output on an AMD EPYC
(amd-epyc-zen4.ops.json beside this file, a copy of ../shared/numerics/) compares with this one's; the entries after
them (`route.*`, `world.*`) are the kinds of op the portable step that calls no MKL vector math (gropd/vector_math.py)
takes and those 87 lack: its exp and sqrt routes, the rotary table, the I32 teachers' shapes (hidden 104, heads of
26), SiLU's backward, the discount γ^t and fused AdamW at the runs' settings. `--compare` names each entry whose
bits differ and each that the first file has no hash for (a risk nobody has measured yet).
The last entries are the step's monitoring correlations: `scipy.*` as gropd/train/step.py took them with scipy, whose
numpy reaches OpenBLAS (its kernels are chosen by CPU, not by any of torch's pins; OPENBLAS_CORETYPE overrides the
choice), and `step.*` as gropd/train/correlation.py takes them without BLAS, where the checkout has that module.

Files beside this one, named by CPU family and model and pin set: amd-epyc-25-17.portable.ops.json and
amd-epyc-25-17.avx2.ops.json (an AMD EPYC, Zen 4), amd-epyc-25-1.portable.ops.json and amd-epyc-25-1.avx2.ops.json
(an AMD EPYC, Zen 3: ../shared/numerics/, made before the correlations' entries), intel-xeon-6-167.ops.json (an
Intel Xeon, the portable pins, before them too).

`--pins NAME` sets one of gropd/numerics.py's PIN_SETS before torch loads (this process loads it only then):
`portable`, the portable mode's (MKL_CBWR=COMPATIBLE, ATEN_CPU_CAPABILITY=default, ONEDNN_MAX_CPU_ISA=SSE41,
GROPD_VECTOR_MATH=aten), the default; `avx2`, a candidate for a faster mode (MKL_CBWR=AVX2, ATEN_CPU_CAPABILITY=avx2,
ONEDNN_MAX_CPU_ISA=AVX2, GROPD_VECTOR_MATH=aten); `--native` sets none. One thread. The output records the pin set,
the variables in force and ATen's kernels in use; a CPU whose ATen cannot take the kernels asked for is refused (exit
2, nothing written), as is a pin set not in PIN_SETS."""

# ruff: noqa: E501  (the shared battery's lines as they are, so that its entries stay its own)
from __future__ import annotations

import argparse
import hashlib
import importlib
import importlib.util
import json
import math
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # this project's gropd, run as a script from anywhere
from gropd.numerics import PIN_SETS, PINNED, pin_set  # noqa: E402  (imports no torch)


def battery() -> dict:
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(1)
    g = torch.Generator().manual_seed(1234)

    def u(*shape, lo=-1.0, hi=1.0):
        return (torch.rand(*shape, generator=g) * (hi - lo) + lo).float()

    def h(*tensors):
        d = hashlib.sha1()
        for t in tensors:
            d.update(t.detach().contiguous().view(-1).view(torch.uint8).numpy().tobytes())
        return d.hexdigest()[:12]

    n = 1 << 18
    wide, near0, tiny0, pos = (
        u(n, lo=-20, hi=20),
        u(n, lo=-1e-2, hi=1e-2),
        u(n, lo=-1e-6, hi=1e-6),
        u(n, lo=1e-4, hi=50),
    )
    unit = u(n)
    out: dict[str, str] = {}  # a hash per op, or "True"/"False" for a check
    # MKL VML (ATen routes these float ops to vs*/vd* with VML_HA on contiguous inputs)
    for name, f in {
        "exp": torch.exp,
        "log": torch.log,
        "tanh": torch.tanh,
        "sin": torch.sin,
        "cos": torch.cos,
        "sqrt": torch.sqrt,
        "erf": torch.erf,
        "log1p": torch.log1p,
        "expm1": torch.expm1,
        "log2": torch.log2,
        "log10": torch.log10,
    }.items():
        arg = pos if name in ("log", "sqrt", "log2", "log10") else (unit if name in ("log1p", "erf") else wide)
        out[f"vml.{name}"] = h(f(arg))
    out["vml.exp.near0"] = h(torch.exp(near0))
    out["vml.exp.tiny0"] = h(torch.exp(tiny0))
    out["vml.exp.short7"] = h(torch.exp(wide[:7]))
    out["vml.exp.float64"] = h(torch.exp(wide.double()))
    # candidate replacements for VML exp / sqrt that take ATen's own kernels
    out["cand.exp_via_float64"] = h(torch.exp(wide.double()).float())
    out["cand.exp_via_float64.near0"] = h(torch.exp(near0.double()).float())
    out["cand.exp2_scaled"] = h(torch.exp2(wide * (1 / math.log(2))))
    out["cand.exp2_scaled.near0"] = h(torch.exp2(near0 * (1 / math.log(2))))
    out["cand.pow_e"] = h(torch.pow(math.e, wide))
    out["cand.sigmoid_ratio"] = h(torch.sigmoid(near0) / torch.sigmoid(-near0))
    out["cand.softmax_pair_exp"] = h(torch.softmax(torch.stack([near0, torch.zeros_like(near0)], -1), -1))
    out["cand.sqrt_via_float64"] = h(torch.sqrt(pos.double()).float())
    out["cand.pow_half"] = h(torch.pow(pos, 0.5))
    out["cand.rsqrt_recip"] = h(1 / torch.rsqrt(pos))
    out["cand.x_times_rsqrt"] = h(pos * torch.rsqrt(pos))
    # float64 (the credit's group statistics are computed in float64) and IEEE checks against numpy
    import numpy as np

    pos64 = pos.double() * 1.0000001
    out["vml.sqrt.f64"] = h(torch.sqrt(pos64))
    out["vml.sqrt.f32.ieee"] = str(bool((torch.sqrt(pos).numpy() == np.sqrt(pos.numpy())).all()))
    out["vml.sqrt.f64.ieee"] = str(bool((torch.sqrt(pos64).numpy() == np.sqrt(pos64.numpy())).all()))
    out["aten.rsqrt.f64"] = h(torch.rsqrt(pos64))
    out["aten.sum.f64"] = h(pos64.sum())
    out["aten.softmax.f64"] = h(torch.softmax(u(512, 102, lo=-8, hi=8).double(), -1))
    # the tiny vocabulary (102): sampling probabilities and entropies the way a portable step may take them
    logits = u(4096, 102, lo=-12, hi=12)
    logp = torch.log_softmax(logits, -1)
    out["tiny.log_softmax"] = h(logp)
    out["tiny.softmax"] = h(torch.softmax(logits, -1))
    out["tiny.exp_of_log_softmax"] = h(logp.exp())
    out["tiny.entropy_softmax"] = h(-(torch.softmax(logits, -1) * logp).sum(-1))
    out["tiny.multinomial_softmax"] = h(
        torch.multinomial(torch.softmax(logits, -1), 1, generator=torch.Generator().manual_seed(3))
    )
    # ATen vectorised kernels (ATEN_CPU_CAPABILITY)
    rows = u(512, 1000, lo=-8, hi=8)
    for name, f in {
        "sigmoid": lambda: torch.sigmoid(wide),
        "silu": lambda: F.silu(wide),
        "rsqrt": lambda: torch.rsqrt(pos),
        "pow2": lambda: wide.pow(2),
        "softmax": lambda: torch.softmax(rows, -1),
        "log_softmax": lambda: torch.log_softmax(rows, -1),
        "sum": lambda: wide.sum(),
        "mean_rows": lambda: rows.mean(-1),
        "cumsum": lambda: unit.cumsum(0),
        "norm": lambda: torch.linalg.vector_norm(wide),
        "var": lambda: rows.var(-1),
        "logsumexp": lambda: torch.logsumexp(rows, -1),
        "multinomial": lambda: torch.multinomial(
            torch.softmax(rows, -1), 1, generator=torch.Generator().manual_seed(7)
        ),
    }.items():
        out[f"aten.{name}"] = h(f())
    # MKL BLAS (MKL_CBWR) at the tiny models' sizes and a few others
    # the tiny models: hidden 96, MLP 384, vocabulary 102, 4 heads of 24; a forward packs up to 2,048 tokens
    for m, k, nn in [
        (2048, 96, 384),
        (2048, 384, 96),
        (2048, 96, 102),
        (2048, 96, 96),
        (64, 96, 288),
        (1, 96, 384),
        (300, 256, 256),
        (7, 96, 33),
    ]:
        a, b = u(m, k), u(k, nn)
        out[f"blas.mm.{m}x{k}x{nn}"] = h(a @ b)
        out[f"blas.mm_tn.{m}x{k}x{nn}"] = h(a.t().contiguous().t() @ b, a.t() @ u(m, nn))
        out[f"blas.mm_nt.{m}x{k}x{nn}"] = h(a @ b.t().contiguous().t(), u(m, nn) @ b.t())
    out["blas.bmm"] = h(torch.bmm(u(8, 64, 32), u(8, 32, 48)))
    # rotary embedding as transformers' Qwen3 computes it (float32: inv_freq @ positions, then cos and sin)
    inv_freq = 1.0 / (10000.0 ** (torch.arange(0, 24, 2, dtype=torch.int64).float() / 24))
    positions = torch.arange(512).float()[None, None, :]
    freqs = (inv_freq[None, :, None] @ positions).transpose(1, 2)
    emb = torch.cat((freqs, freqs), dim=-1)
    out["rope.freqs"], out["rope.cos"], out["rope.sin"] = h(freqs), h(emb.cos()), h(emb.sin())
    # attention, linear and embedding, forward and backward
    q, k, v = (u(2, 4, 96, 24).requires_grad_() for _ in range(3))
    o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    o.backward(u(2, 4, 96, 24))
    out["sdpa.forward"], out["sdpa.backward"] = h(o), h(q.grad, k.grad, v.grad)
    w = u(384, 96).requires_grad_()
    x = u(512, 96).requires_grad_()
    y = F.linear(x, w)
    y.backward(u(512, 384))
    out["linear.forward"], out["linear.backward"] = h(y), h(x.grad, w.grad)
    table = u(102, 96).requires_grad_()
    e = F.embedding(torch.randint(0, 102, (4096,), generator=g), table)
    e.backward(u(4096, 96))
    out["embedding.backward"] = h(table.grad)
    logits = u(1024, 102, lo=-5, hi=5).requires_grad_()
    ce = F.cross_entropy(logits, torch.randint(0, 102, (1024,), generator=g))
    ce.backward()
    out["cross_entropy"] = h(ce, logits.grad)
    # the optimiser and the gradient clip
    for foreach in (False, True, "fused"):
        params = [u(384, 96).requires_grad_(), u(96).requires_grad_()]
        opt = (
            torch.optim.AdamW(params, lr=2e-4, fused=True)
            if foreach == "fused"
            else torch.optim.AdamW(params, lr=2e-4, foreach=foreach)
        )
        for _ in range(3):
            for p in params:
                p.grad = u(*p.shape)
            torch.nn.utils.clip_grad_norm_(params, 0.5)
            opt.step()
        out[f"adamw.{'fused' if foreach == 'fused' else f'foreach={foreach}'}"] = h(*params)
    out.update(vml_free_routes(u, h))
    out.update(monitoring_correlations(u, h))
    return out


def vml_free_routes(u, h) -> dict:
    """The entries the shared battery lacks: what the portable step that calls no MKL vector math computes."""
    import torch
    import torch.nn.functional as F

    out: dict[str, str] = {}
    log2_e = 1.0 / math.log(2.0)
    logp = torch.log_softmax(u(4096, 102, lo=-12, hi=12), -1)  # sampling, entropy and the logits' gradient
    out["route.exp.log_probs"] = h(torch.exp2(logp * log2_e))
    out["route.exp.ratio"] = h(torch.exp2(u(1 << 16, lo=-0.5, hi=0.5) * log2_e))  # the loss's importance ratio
    var64 = u(1 << 16, lo=0.0, hi=50.0).double()
    out["route.sqrt.f64"] = h(torch.reciprocal(torch.rsqrt(var64)))  # the credit's sigma
    out["route.sqrt.f32"] = h(torch.reciprocal(torch.rsqrt(var64.float())))
    scores = u(128, lo=-40, hi=10).double()
    discount = torch.pow(torch.tensor(0.99, dtype=torch.float64), torch.arange(200, dtype=torch.float64))
    out["world.discount.f64"] = h(discount)  # gamma^(t-1), then S_i and the group statistics in float64
    grouped = scores.reshape(16, 8)
    out["world.group_stats.f64"] = h(grouped.mean(1), ((grouped - grouped.mean(1)[:, None]) ** 2).sum(1) / 7)
    for head_dim in (24, 26):
        inv_freq = 1.0 / (10000.0 ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
        freqs = torch.arange(512, dtype=torch.float32)[:, None] * inv_freq[None, :]
        angles = torch.cat((freqs, freqs), -1).double().tolist()
        cos = torch.tensor([[math.cos(a) for a in row] for row in angles], dtype=torch.float64).float()
        sin = torch.tensor([[math.sin(a) for a in row] for row in angles], dtype=torch.float64).float()
        out[f"route.rope_table.d{head_dim}"] = h(freqs, cos, sin)  # gropd/model/rotary_table.py
        q, k, v = (u(2, 4, 96, head_dim).requires_grad_() for _ in range(3))
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        o.backward(u(2, 4, 96, head_dim))
        out[f"world.sdpa.d{head_dim}"] = h(o, q.grad, k.grad, v.grad)
    for m, k, n in [(2048, 104, 416), (2048, 416, 104), (2048, 104, 102), (2048, 104, 312), (64, 104, 312)]:
        a, b = u(m, k), u(k, n)
        out[f"world.mm.{m}x{k}x{n}"] = h(a @ b, a.t() @ u(m, n), u(m, n) @ b.t())
    x = u(1 << 16, lo=-8, hi=8).requires_grad_()
    F.silu(x).backward(u(1 << 16))
    out["world.silu_backward"] = h(x.grad)
    params = [u(384, 96).requires_grad_(), u(96).requires_grad_()]
    opt = torch.optim.AdamW(params, lr=2e-4, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, fused=True)
    for _ in range(3):
        for p in params:
            p.grad = u(*p.shape)
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
    out["world.adamw.fused.runs"] = h(*params)
    return out


def monitoring_correlations(u, h) -> dict:
    """The monitoring correlations of gropd/train/step.py (Pearson of score against length, Spearman of score against
    reward) on 64 rollout batches of 128 responses: scipy's (`scipy.*`), whose numpy reaches OpenBLAS, which picks its
    kernels by CPU (OPENBLAS_CORETYPE overrides the choice), whatever torch's pins say; and, where this checkout has
    it, gropd/train/correlation.py's (`step.*`: issue 61's replacement, which calls no BLAS)."""
    import torch
    from scipy import stats

    own = (
        importlib.import_module("gropd.train.correlation")
        if importlib.util.find_spec("gropd.train.correlation")
        else None
    )
    values: dict[str, list[float]] = {
        "scipy.pearsonr": [],
        "scipy.spearmanr": [],
        "step.pearson": [],
        "step.spearman": [],
    }
    for _ in range(64):
        scores = u(128, lo=-40, hi=10).double().tolist()
        lengths, rewards = u(128, lo=1, hi=201).floor().double().tolist(), (u(128) > 0).double().tolist()
        values["scipy.pearsonr"].append(float(stats.pearsonr(scores, lengths)[0]))
        values["scipy.spearmanr"].append(float(stats.spearmanr(scores, rewards)[0]))
        if own is not None:
            values["step.pearson"].append(own.pearson(scores, lengths))
            values["step.spearman"].append(own.spearman(scores, rewards))
    return {name: h(torch.tensor(found, dtype=torch.float64)) for name, found in values.items() if found}


def compare(path_a: str, path_b: str) -> int:
    """Name each entry whose bits differ between two outputs and each of B's that A lacks; 1 if any differ."""
    a, b = (json.load(open(p)) for p in (path_a, path_b))
    print(f"A: {a['machine']}\nB: {b['machine']}")
    differ = [k for k in a["ops"] if k in b["ops"] and a["ops"][k] != b["ops"][k]]
    unmeasured = [k for k in b["ops"] if k not in a["ops"]]
    for k in differ:
        print(f"  differs: {k}")
    for k in unmeasured:
        print(f"  no hash in A: {k}")
    shared = sum(k in b["ops"] for k in a["ops"])
    print(f"{len(differ)} of {shared} differ; {len(unmeasured)} of B's entries have no hash in A")
    return 1 if differ else 0


def cpu_fields() -> dict:
    """The first processor's vendor, model name, family and model, as /proc/cpuinfo names them."""
    cpu = {}
    try:
        for line in open("/proc/cpuinfo"):
            key, _, value = line.partition(":")
            if key.strip() in ("vendor_id", "model name", "cpu family", "model") and key.strip() not in cpu:
                cpu[key.strip()] = value.strip()
    except OSError:
        pass
    return cpu


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--compare", nargs=2, metavar=("A", "B"), help="name the entries whose bits differ")
    pinned = parser.add_mutually_exclusive_group()
    pinned.add_argument("--pins", choices=list(PIN_SETS), default="portable", help="the variables set before torch")
    pinned.add_argument("--native", action="store_true", help="set none of them")
    args = parser.parse_args(argv)
    if args.compare:
        return compare(*args.compare)
    pins = {} if args.native else pin_set(args.pins)
    os.environ.update(pins)
    import numpy
    import scipy
    import torch

    aten = str(torch.backends.cpu.get_cpu_capability())
    if "ATEN_CPU_CAPABILITY" in pins and aten != pins["ATEN_CPU_CAPABILITY"].upper():
        print(
            f"op_battery.py: --pins {args.pins} asks for ATen's {pins['ATEN_CPU_CAPABILITY']} kernels, but this "
            f"process runs {aten} (a CPU without them, or torch loaded before the pins): nothing written",
            file=sys.stderr,
        )
        return 2
    machine = {
        "cpu": cpu_fields(),
        "torch": torch.__version__,
        "aten": aten,
        "pins": "native" if args.native else args.pins,
        "pinned": {k: os.environ.get(k) for k in PINNED},
        "numpy": numpy.__version__,
        "scipy": scipy.__version__,
        "OPENBLAS_CORETYPE": os.environ.get("OPENBLAS_CORETYPE"),  # numpy's BLAS kernels (the scipy.* entries)
    }
    print(json.dumps({"machine": machine, "ops": battery()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""A process's CPU numerics mode (`backend.numerics`): which code paths PyTorch's CPU math may take, and what a
run records of the machine it ran on. Imports no torch: the mode has to be in the environment before torch is.

PyTorch's CPU math comes from three libraries, each of which picks its kernels for the CPU it finds:

- MKL (BLAS: every float32 matmul). `MKL_CBWR` (Conditional Numerical Reproducibility) fixes the code branch.
  Its developer guide documents `AVX2` as reproducible across *Intel* CPUs with AVX2 only ("on non-Intel CPUs
  ... the AUTO branch is used instead"); `COMPATIBLE` (SSE2 without rcpps/rsqrtps) is the branch for Intel and
  compatible CPUs alike.
- ATen's vectorised kernels (elementwise ops, softmax, reductions, CPU flash attention): `ATEN_CPU_CAPABILITY`
  (`default`: the build's baseline kernels, no CPU-specific vectorisation), read when torch is imported.
- oneDNN: `ONEDNN_MAX_CPU_ISA` caps the instruction set its JIT kernels use.
- MKL's vector math (VML: float exp, log, sqrt, cos, sin, ... on a CPU), which no switch fixes: on an AMD CPU
  `MKL_CBWR` does not reach it. `GROPD_VECTOR_MATH=aten` makes this project's code take routes that never call it
  (gropd/vector_math.py).

Modes:
    portable  MKL_CBWR=COMPATIBLE, ATEN_CPU_CAPABILITY=default, ONEDNN_MAX_CPU_ISA=SSE41, GROPD_VECTOR_MATH=aten:
              the same code path on every x86-64 CPU, meant to give the same bits on an Intel Xeon and an AMD EPYC
              (one thread; the thread count is part of a run's config). Checked across vendors op by op
              (../shared/numerics: the op battery), a whole run on Intel Xeons only (tests/test_portable_numerics.py).
              About 2x the native step on an AVX-512 Xeon.
    native    nothing pinned: the fastest kernels for this CPU; bits differ between CPU families. GPU runs
              are reproducible only within one machine in any mode.

`enter(mode)` puts the mode in this process's environment before torch loads, or refuses (NumericsError) when
torch is already loaded under other settings; children inherit the environment. `machine_record()` is what
status.json records of the process: the mode, the pinned variables, ATen's capability in use, the CPU, the
thread count and the versions of torch, MKL, oneDNN and the C library (glibc's libm computes ATen's baseline
transcendental functions).
"""

from __future__ import annotations

import os
import platform
import sys
from collections.abc import MutableMapping
from pathlib import Path
from typing import Any

PINNED = ("MKL_CBWR", "ATEN_CPU_CAPABILITY", "ONEDNN_MAX_CPU_ISA", "GROPD_VECTOR_MATH")
MODES: dict[str, dict[str, str]] = {
    "portable": {
        "MKL_CBWR": "COMPATIBLE",
        "ATEN_CPU_CAPABILITY": "default",
        "ONEDNN_MAX_CPU_ISA": "SSE41",
        "GROPD_VECTOR_MATH": "aten",
    },
    "native": {},
}
# Pin sets measured, each by name, by the op battery (tools/numerics/op_battery.py --pins) and the step benchmark
# (benchmarks/train_step.py --pins): the portable mode's, and `avx2`, a candidate for a faster portable mode (MKL's
# and ATen's AVX2 kernels, oneDNN capped at AVX2, MKL's vector math off as in the portable mode) that no run may take
# until the battery shows it gives the same bits on every CPU it is meant for (issue 67, experiments/TINY.md).
PIN_SETS: dict[str, dict[str, str]] = {
    "portable": MODES["portable"],
    "avx2": {**MODES["portable"], "MKL_CBWR": "AVX2", "ATEN_CPU_CAPABILITY": "avx2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
}
CPU_FLAGS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512_bf16", "amx_tile")  # the code paths they open
ONEDNN_FOR_ATEN = {"default": "SSE41", "avx2": "AVX2"}  # oneDNN's cap matching a lowered ATen capability


class NumericsError(RuntimeError):
    """This process cannot compute in the mode asked for (torch already loaded under other settings)."""


def environment(mode: str) -> dict[str, str]:
    """The variables `mode` pins (KeyError naming the modes for another name)."""
    if mode not in MODES:
        raise KeyError(f"numerics mode {mode!r} (expected one of {', '.join(MODES)})")
    return dict(MODES[mode])


def pin_set(name: str) -> dict[str, str]:
    """The variables pin set `name` sets (KeyError naming the sets for another name)."""
    if name not in PIN_SETS:
        raise KeyError(f"pin set {name!r} (expected one of {', '.join(PIN_SETS)})")
    return dict(PIN_SETS[name])


def mismatches(mode: str, environ: MutableMapping[str, str]) -> list[str]:
    """`NAME=found (mode wants wanted)` for each variable of `mode` that `environ` does not hold as the mode pins it."""
    return [
        f"{name}={environ.get(name, '<unset>')} ({mode} wants {wanted})"
        for name, wanted in environment(mode).items()
        if environ.get(name) != wanted
    ]


def enter(mode: str, environ: MutableMapping[str, str] | None = None) -> None:
    """Make this process compute in `mode`: before torch is imported, set its variables (children inherit
    them); after, refuse unless torch was loaded under them (NumericsError naming each variable). ATen's
    capability in use is checked too, since that library reads its variable at import."""
    environ = os.environ if environ is None else environ
    wanted = environment(mode)
    if "torch" not in sys.modules:
        environ.update(wanted)
        return
    wrong = mismatches(mode, environ)
    capability = aten_capability()
    if "ATEN_CPU_CAPABILITY" in wanted and capability != wanted["ATEN_CPU_CAPABILITY"].upper():
        wrong.append(f"ATen's kernels in use are {capability} ({mode} wants {wanted['ATEN_CPU_CAPABILITY'].upper()})")
    if wrong:
        raise NumericsError(
            f"backend.numerics={mode}, but torch was already imported in this process under other settings: "
            f"{'; '.join(wrong)}. Start a fresh process (gropd.cli sets them before torch loads), or export "
            f"{' '.join(f'{k}={v}' for k, v in wanted.items())} before it starts"
        )


def cap_onednn_to_aten(environ: MutableMapping[str, str] | None = None) -> str | None:
    """Where ATEN_CPU_CAPABILITY lowers ATen's kernels to `default` or `avx2` and ONEDNN_MAX_CPU_ISA is unset, cap
    oneDNN at the same level (SSE41, AVX2) and return it; else change nothing and return None. Before torch loads:
    importing gropd does it for the process and its children.
    Why: torch's CPU flash attention asks oneDNN whether the CPU packs bf16 blocks for AMX, then packs them with
    ATen's kernels, which only their AVX-512 build can ("pack_vnni2 is only supported when avx512 is supported":
    bf16 attention fails on an AMX CPU under ATEN_CPU_CAPABILITY=avx2 alone; torch 2.13,
    tests/test_portable_numerics.py)."""
    environ = os.environ if environ is None else environ
    level = ONEDNN_FOR_ATEN.get(environ.get("ATEN_CPU_CAPABILITY", "").lower())
    if level is None or "ONEDNN_MAX_CPU_ISA" in environ:
        return None
    environ["ONEDNN_MAX_CPU_ISA"] = level
    return level


def aten_capability() -> str:
    """ATen's CPU kernels in use (DEFAULT, AVX2, AVX512, ...): what ATEN_CPU_CAPABILITY and the CPU allowed."""
    import torch

    return str(torch.backends.cpu.get_cpu_capability())


def cpu_record(cpuinfo: str | None = None) -> dict[str, Any]:
    """The CPU as /proc/cpuinfo names it (first processor): vendor, model name, family, model, and which of
    CPU_FLAGS it has; the machine's architecture where there is no /proc/cpuinfo."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text()
        except OSError:
            return {"arch": platform.machine()}
    fields: dict[str, str] = {}
    for line in cpuinfo.split("\n\n", 1)[0].splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    flags = set(fields.get("flags", "").split())
    return {
        "arch": platform.machine(),
        "vendor": fields.get("vendor_id"),
        "model_name": fields.get("model name"),
        "family": fields.get("cpu family"),
        "model": fields.get("model"),
        "flags": [flag for flag in CPU_FLAGS if flag in flags],
    }


def library_versions() -> dict[str, str | None]:
    """torch's version, those of the MKL and oneDNN it was built with (torch.__config__) and the C library's
    (libc_version)."""
    import torch

    info = torch.__config__.parallel_info().splitlines()
    mkl = next((line.split("Version", 1)[1].split("for")[0].strip() for line in info if "Math Kernel" in line), None)
    onednn = next((line.strip() for line in info if "MKL-DNN" in line or "oneDNN" in line), None)
    return {"torch": torch.__version__, "mkl": mkl, "onednn": onednn, "libc": libc_version()}


def libc_version() -> str | None:
    """The C library this process runs on, e.g. 'glibc 2.36' (its libm computes ATen's baseline transcendental
    functions): confstr's CS_GNU_LIBC_VERSION, else platform.libc_ver(); None where neither names one."""
    try:
        named = os.confstr("CS_GNU_LIBC_VERSION")
    except (AttributeError, ValueError, OSError):  # no confstr, or a C library that is not glibc
        named = None
    if named:
        return named
    library, version = platform.libc_ver()
    return f"{library} {version}" if library else None


def machine_record(mode: str, threads: int | None) -> dict[str, Any]:
    """What a run records of the process that computes it (status.json `machines`): `threads` is the run's
    backend.threads (None: torch's own count)."""
    import torch

    return {
        "numerics": mode,
        "pinned": {name: os.environ.get(name) for name in PINNED},
        "aten_capability": aten_capability(),
        "threads": threads or torch.get_num_threads(),
        "cpu": cpu_record(),
        **library_versions(),
    }


def describe(record: dict[str, Any]) -> str:
    """One line of a machine record: mode, CPU, ATen's kernels, libraries (the C library "not recorded" in a
    record made before runs recorded it), threads."""
    cpu = record.get("cpu") or {}
    where = f"{cpu.get('vendor')} {cpu.get('model_name')} (family {cpu.get('family')} model {cpu.get('model')})"
    mkl = (record.get("mkl") or "?").split("-")[0]
    libc = record.get("libc") or ("C library unknown" if "libc" in record else "C library not recorded")
    return (
        f"{record.get('numerics')} · {where} · ATen {record.get('aten_capability')} · torch {record.get('torch')}, "
        f"MKL {mkl}, {libc} · {record.get('threads')} thread(s)"
    )

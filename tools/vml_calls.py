"""Count the calls a command makes into MKL's vector math (VML), process by process, with gdb breakpoints on every
VML entry point of the torch it imports.

    .venv/bin/python tools/vml_calls.py [--portable] -- COMMAND ...
    .venv/bin/python tools/vml_calls.py --portable -- .venv/bin/python -m gropd.cli run RUN_ID --profile tiny \
        train.steps=1 eval.questions=2 'eval.suites=[add]'

The entry points are the functions of torch's libtorch_cpu.so named like MKL's VML API (`vsExp`, `vmdSqrt`, ...:
`v[m]{s,d}<Name>`), read from its symbol table with readelf. gdb follows every child process (the evaluation runs
in one of its own), stops at each call, prints `##VML <process> <symbol>` and goes on. `--portable` puts the
portable numerics mode's variables (gropd/numerics.py) in the command's environment. Prints the calls per process
and symbol; exit status 1 when there was any, 2 when gdb or readelf is missing. An independent check of
tests/test_vector_math.py, which scans ATen ops under a dispatch mode instead: this one sees the library calls
themselves, on this machine only (it needs gdb)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

VML_SYMBOL = re.compile(r"^vm?[sd][A-Z][A-Za-z0-9]*$")


def vml_symbols(library: Path) -> list[str]:
    """The VML entry points `library` defines (readelf's symbol table)."""
    table = subprocess.run(["readelf", "-sW", str(library)], capture_output=True, text=True, check=True).stdout
    names = {fields[7] for fields in (line.split() for line in table.splitlines()) if len(fields) >= 8}
    return sorted(name for name in names if VML_SYMBOL.match(name))


def gdb_script(symbols: list[str]) -> str:
    """Breakpoints that print `##VML <inferior> <symbol>` and continue, in every process the command starts."""
    lines = ["set pagination off", "set breakpoint pending on", "set detach-on-fork off", "set schedule-multiple on"]
    for name in symbols:
        lines += [f"break {name}", "commands", "silent", f'printf "##VML %d {name}\\n", $_inferior', "continue", "end"]
    return "\n".join([*lines, "run", "quit", ""])


def main(argv: list[str]) -> int:
    portable = "--portable" in argv[: argv.index("--")] if "--" in argv else False
    command = argv[argv.index("--") + 1 :] if "--" in argv else []
    if not command:
        print(__doc__, file=sys.stderr)
        return 2
    if not shutil.which("gdb") or not shutil.which("readelf"):
        print("vml_calls: needs gdb and readelf (apt-get install gdb binutils)", file=sys.stderr)
        return 2
    import torch  # only to find its library; the command runs in a process of its own

    library = Path(torch.__file__).parent / "lib" / "libtorch_cpu.so"
    symbols = vml_symbols(library)
    env = dict(os.environ)
    if portable:
        from gropd.numerics import environment

        env.update(environment("portable"))
    with tempfile.NamedTemporaryFile("w", suffix=".gdb", delete=False) as script:
        script.write(gdb_script(symbols))
    done = subprocess.run(
        ["gdb", "-q", "-batch", "-x", script.name, "--args", *command],
        env=env,
        stdin=subprocess.DEVNULL,  # gdb with a terminal of a background job would stop on it (SIGTTOU)
        capture_output=True,
        text=True,
    )
    os.unlink(script.name)
    calls = Counter(tuple(line.split()[1:3]) for line in done.stdout.splitlines() if line.startswith("##VML "))
    processes = 1 + len(re.findall(r"\[New inferior \d+", done.stdout))
    print(f"{len(symbols)} VML entry points of {library}; {processes} process(es) started")
    for (inferior, name), count in sorted(calls.items()):
        print(f"  process {inferior}: {name} x{count}")
    print(f"{sum(calls.values())} VML call(s)")
    return 1 if calls else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

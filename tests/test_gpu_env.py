"""The GPU environment is installed on purpose: `./reproduce.sh gpu-env` makes or upgrades .venv for the paper
profile on GPUs from any node, its stamp covers exactly what was installed, and a job whose .venv lacks it stops
at `./reproduce.sh check` in seconds naming that command. Nothing is installed here: `python3.11` is a stand-in
that makes a .venv whose `python` records every call (pip's installs among them) and succeeds, unless told to
fail an install; `nvidia-smi -L` is a stand-in that lists GPUs (what a GPU node's driver prints) or is absent (a
login node)."""

from __future__ import annotations

import hashlib
import shutil
import stat
import subprocess
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VENV_PYTHON = """#!/usr/bin/env bash
echo "$*" >> "$CALLS"
if [[ "$*" == *"-r $FAIL_INSTALL"* ]]; then echo "ERROR: no matching distribution" >&2; exit 1; fi
"""
PYTHON311 = f"""#!/usr/bin/env bash
[[ "$1 $2" == "-m venv" ]] || exit 1
mkdir -p "$3/bin" && cat > "$3/bin/python" <<'EOF'
{VENV_PYTHON}EOF
chmod +x "$3/bin/python"
"""
NVIDIA_SMI = '#!/usr/bin/env bash\nfor i in 0 1 2 3 4 5 6 7; do echo "GPU $i: NVIDIA H100 80GB HBM3"; done\n'


def clone(tmp_path: Path) -> Path:
    """The front door and its requirement files, as a fresh clone has them (no .venv)."""
    root = tmp_path / "clone"
    root.mkdir()
    for name in ("reproduce.sh", "requirements.txt", "requirements-gpu.txt"):
        shutil.copy(REPO / name, root / name)
    return root


def tools(tmp_path: Path, gpus: bool) -> str:
    """PATH with the stand-in python3.11 (and nvidia-smi on a GPU node) before the system's tools."""
    folder = tmp_path / ("gpu-node" if gpus else "login-node")
    folder.mkdir(exist_ok=True)
    scripts = {"python3.11": PYTHON311} | ({"nvidia-smi": NVIDIA_SMI} if gpus else {})
    for name, body in scripts.items():
        (folder / name).write_text(body)
        (folder / name).chmod(stat.S_IRWXU)
    return f"{folder}:/usr/bin:/bin"


def reproduce(
    root: Path, tmp_path: Path, *args: str, gpus: bool = False, fail: str = "none"
) -> tuple[int, str, list[str]]:
    """(exit status, stderr, the .venv python calls this command made)."""
    calls = tmp_path / "calls"
    calls.write_text("")
    env = {"PATH": tools(tmp_path, gpus), "HOME": str(tmp_path), "CALLS": str(calls), "FAIL_INSTALL": fail}
    done = subprocess.run(
        ["bash", "reproduce.sh", *args], cwd=root, env=env, capture_output=True, text=True, timeout=60
    )
    return done.returncode, done.stderr, calls.read_text().splitlines()


def installs(calls: list[str]) -> list[str]:
    return [call.split("install -q ", 1)[1] for call in calls if call.startswith("-m pip install")]


def stamp_of(root: Path, *files: str) -> str:
    return hashlib.sha256(b"".join((root / name).read_bytes() for name in files)).hexdigest()


def test_a_venv_made_on_the_login_node_gets_the_gpu_environment_by_one_command(tmp_path: Path) -> None:
    root = clone(tmp_path)
    code, _, calls = reproduce(root, tmp_path, "rehearse")  # the README's first step, on the login node
    assert code == 0 and installs(calls) == [
        "--upgrade pip",
        "-r requirements.txt",
        "--no-deps --no-build-isolation -e .",
    ]
    assert not (root / ".venv/.gpu").exists()
    code, err, calls = reproduce(root, tmp_path, "rehearse", gpus=True)  # the same .venv seen from a GPU node
    assert code == 0 and installs(calls) == []  # never installed by accident of where it runs ...
    assert "./reproduce.sh gpu-env installs it" in err  # ... but said
    code, err, calls = reproduce(root, tmp_path, "gpu-env")  # on purpose, from the login node
    assert code == 0, err
    assert installs(calls) == [
        "--upgrade pip",
        "-r requirements.txt",
        "-r requirements-gpu.txt",
        "--no-deps --no-build-isolation -e .",
    ]
    stamp = (root / ".venv/.requirements.sha256").read_text().strip()
    assert stamp == stamp_of(root, "requirements.txt", "requirements-gpu.txt") and (root / ".venv/.gpu").exists()
    for gpus in (True, False):  # kept as it is by every later target, on either node
        assert reproduce(root, tmp_path, "rehearse", gpus=gpus)[2] == ["-m benchmarks.rehearsal"]


def test_the_stamp_covers_exactly_what_was_installed(tmp_path: Path) -> None:
    root = clone(tmp_path)
    code, err, _ = reproduce(root, tmp_path, "gpu-env", fail="requirements-gpu.txt")
    assert code != 0 and "no matching distribution" in err
    assert not (root / ".venv/.requirements.sha256").exists()  # cut short: no stamp, so the next call installs
    code, _, calls = reproduce(root, tmp_path, "gpu-env")
    assert code == 0 and "-r requirements-gpu.txt" in installs(calls)
    with (root / "requirements-gpu.txt").open("a") as pins:
        pins.write("ninja==1.13.0\n")  # a changed GPU pin: installed again (after requirements.txt: torch 2.14 wins)
    code, _, calls = reproduce(root, tmp_path, "rehearse")
    assert code == 0 and installs(calls)[1:3] == ["-r requirements.txt", "-r requirements-gpu.txt"]
    assert (root / ".venv/.requirements.sha256").read_text().strip() == stamp_of(
        root, "requirements.txt", "requirements-gpu.txt"
    )


def test_a_job_whose_venv_lacks_the_gpu_environment_stops_in_seconds_naming_the_command(tmp_path: Path) -> None:
    root = clone(tmp_path)
    assert reproduce(root, tmp_path, "rehearse")[0] == 0  # .venv made on the login node: no GPU environment
    started = time.monotonic()
    code, err, calls = reproduce(root, tmp_path, "check", "--processes", "8", gpus=True)  # a job's first step
    assert code == 2 and time.monotonic() - started < 10
    assert "run ./reproduce.sh gpu-env once, from any node" in err and len(err.strip().splitlines()) == 1
    assert calls == []  # nothing installed, nothing run
    assert reproduce(root, tmp_path, "gpu-env")[0] == 0
    code, _, calls = reproduce(root, tmp_path, "check", "--processes", "8", gpus=True)
    assert code == 0 and calls == ["-m gropd.runs.preflight_env --processes 8"]  # the check itself runs now


def test_gpu_env_takes_no_flags(tmp_path: Path) -> None:
    root = clone(tmp_path)
    code, err, calls = reproduce(root, tmp_path, "gpu-env", "--profile", "paper")
    assert code == 2 and "--profile does not apply to 'gpu-env'" in err and calls == []
    assert not (root / ".venv").exists()  # refused before anything is made

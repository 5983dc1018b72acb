"""reproduce.sh's usage text: exactly its header comment block, however long the header is."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def header(script: Path) -> str:
    """The comment lines after the shebang, up to the first other line, without their `# `."""
    lines = []
    for line in script.read_text().splitlines()[1:]:
        if not line.startswith("#"):
            break
        lines.append(line[2:] if line.startswith("# ") else line[1:])
    return "".join(line + "\n" for line in lines)


def copy_with_venv(tmp_path: Path, extra_header: str = "") -> Path:
    """reproduce.sh (its header extended by `extra_header`) in tmp_path beside a .venv that
    ensure_venv accepts as current: this Python, stamped with requirements.txt's hash."""
    text = (REPO / "reproduce.sh").read_text()
    script = tmp_path / "reproduce.sh"
    script.write_text(text.replace("\nset -euo pipefail\n", f"\n{extra_header}set -euo pipefail\n", 1))
    shutil.copy(REPO / "requirements.txt", tmp_path / "requirements.txt")
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    os.symlink(sys.executable, tmp_path / ".venv" / "bin" / "python")
    stamp = hashlib.sha256((tmp_path / "requirements.txt").read_bytes()).hexdigest()
    (tmp_path / ".venv" / ".requirements.sha256").write_text(stamp + "\n")
    return script


def bash(script: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", str(script), *args], cwd=cwd, capture_output=True, text=True, timeout=60)


def test_help_is_the_header_from_any_directory(tmp_path: Path) -> None:
    script = REPO / "reproduce.sh"
    result = bash(script, "--help", cwd=tmp_path)
    assert result.returncode == 0 and result.stdout == header(script)
    assert result.stdout.startswith("GR-OPD reproduction") and "Targets" in result.stdout
    assert "set -euo pipefail" not in result.stdout


def test_unknown_target_prints_the_whole_header_and_exits_2(tmp_path: Path) -> None:
    script = copy_with_venv(tmp_path, extra_header="#   later    a target added to the header later\n")
    result = bash(script, "nosuch", "--profile", "tiny", cwd=tmp_path)
    assert result.returncode == 2
    assert result.stderr == "unknown target 'nosuch'\n" + header(script)
    assert result.stderr.endswith("\n  later    a target added to the header later\n")  # the last header line
    assert "set -euo pipefail" not in result.stderr and result.stdout == ""

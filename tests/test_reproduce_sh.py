"""reproduce.sh's usage text: exactly its header comment block, however long the header is."""

from __future__ import annotations

import hashlib
import os
import re
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


def copy_with_venv(tmp_path: Path, extra_header: str = "", venv: bool = True) -> Path:
    """reproduce.sh (its header extended by `extra_header`) in tmp_path beside a .venv that
    ensure_venv accepts as current: this Python and its packages, stamped with requirements.txt's hash
    (`venv` False: no .venv, so a command that got as far as ensure_venv would try to make one)."""
    text = (REPO / "reproduce.sh").read_text()
    script = tmp_path / "reproduce.sh"
    script.write_text(text.replace("\nset -euo pipefail\n", f"\n{extra_header}set -euo pipefail\n", 1))
    shutil.copy(REPO / "requirements.txt", tmp_path / "requirements.txt")
    if not venv:
        return script
    (tmp_path / ".venv" / "bin").mkdir(parents=True)
    os.symlink(sys.executable, tmp_path / ".venv" / "bin" / "python")
    if (Path(sys.prefix) / "pyvenv.cfg").exists():  # this Python is a venv's: the copy sees its packages
        shutil.copy(Path(sys.prefix) / "pyvenv.cfg", tmp_path / ".venv" / "pyvenv.cfg")
        os.symlink(Path(sys.prefix) / "lib", tmp_path / ".venv" / "lib")
    stamp = hashlib.sha256((tmp_path / "requirements.txt").read_bytes()).hexdigest()
    (tmp_path / ".venv" / ".requirements.sha256").write_text(stamp + "\n")
    return script


def bash(script: Path, *args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """The script run with this checkout's gropd/ and eval/ first on the path."""
    env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.run(["bash", str(script), *args], cwd=cwd, capture_output=True, text=True, timeout=120, env=env)


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


def test_help_lists_every_target_and_flag_the_readme_names(tmp_path: Path) -> None:
    """Every `./reproduce.sh TARGET` and every flag of a reproduce.sh line of the README or docs/usage.md, or of
    usage.md's Targets section, is in --help, and the help's targets are those the script accepts."""
    help_text = bash(REPO / "reproduce.sh", "--help", cwd=tmp_path).stdout
    readme = (REPO / "README.md").read_text() + (REPO / "docs" / "usage.md").read_text()
    section = readme[readme.index("## Targets") :].split("\n## ", 1)[0]
    lines = [line for line in readme.splitlines() if "reproduce.sh" in line] + [section]
    flags = {flag for line in lines for flag in re.findall(r"(?<![\w-])--[a-z][a-z-]+", line)}
    targets = set(re.findall(r"\./reproduce\.sh ([a-z][\w-]*)", readme)) | set(
        re.search(r"lists them: `([^`]+)`", section)[1].split()
    )
    helped = set(re.findall(r"^  ([a-z][\w-]*) ", help_text[help_text.index("Targets") :], re.M))
    accepted = re.search(r"\n  (table1\|[^)]+)\) ;;", (REPO / "reproduce.sh").read_text())[1].split("|")
    assert {"--results", "--fast", "--from-results", "--dry-run"} <= flags and "rehearse" in targets
    assert [flag for flag in sorted(flags) if flag not in help_text] == []
    assert sorted(targets - helped) == [] and sorted(helped) == sorted(accepted)

"""The code a process runs, as a run records it (status.json `code`): the git commit of the checkout its `gropd`
package was imported from, and whether that checkout's tree was clean.

Clean: `git status --porcelain --untracked-files=all` lists nothing but untracked files under results/ or under
a path the caller names (the run's own outputs). Where no commit can be named (no git, gropd not imported from a
checkout's root, git refusing the repository), the record is `{"commit": null, "clean": null, "why": "..."}`: it
never raises. Two git calls, made once a session.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

GIT_TIMEOUT_S = 30
OUTPUTS = "results"  # the project's run outputs, relative to the checkout's root


def package_root() -> Path:
    """The directory holding the imported `gropd` package (a checkout's root when run from one)."""
    return Path(__file__).resolve().parents[2]


def code_record(root: Path | None = None, outputs: Sequence[Path] = (), untracked: bool = True) -> dict[str, Any]:
    """{"commit": HEAD's sha, "clean": bool} of the git checkout whose root is `root` (default: package_root()),
    untracked files under results/ and under each of `outputs` not counted (none counted where `untracked` is
    False: tracked files only); {"commit": None, "clean": None, "why": reason} where there is none."""
    root = (root or package_root()).resolve()
    head, why = _git(root, "rev-parse", "--show-toplevel", "HEAD")
    if head is None:
        return unknown(why)
    top, commit = head.splitlines()
    if Path(top).resolve() != root:
        return unknown(f"the code at {root} is not a git checkout's root (it lies inside {top})")
    listed, why = _git(root, "status", "--porcelain", "-z", f"--untracked-files={'all' if untracked else 'no'}")
    if listed is None:
        return unknown(why)
    ignored = [root / OUTPUTS, *(Path(p).resolve() for p in outputs)]
    return {"commit": commit, "clean": not changes(listed, root, ignored)}


def unknown(why: str) -> dict[str, Any]:
    """The record of code whose commit cannot be named."""
    return {"commit": None, "clean": None, "why": why}


def changes(porcelain_z: str, root: Path, ignored: Sequence[Path]) -> list[str]:
    """The paths `git status --porcelain -z` lists, less untracked ones under an `ignored` directory."""
    entries, listed = porcelain_z.split("\0"), []
    while entries:
        entry = entries.pop(0)
        if not entry:
            continue
        code, path = entry[:2], entry[3:]
        if code[0] in "RC" and entries:
            entries.pop(0)  # a rename's or copy's source path
        if code == "??" and any((root / path).is_relative_to(place) for place in ignored):
            continue
        listed.append(path)
    return listed


def _git(root: Path, *args: str) -> tuple[str | None, str]:
    """(git's output in `root`, "") or (None, why there is none)."""
    command = ["git", "--no-optional-locks", "-C", str(root), *args]  # (status writes no index while a user works)
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=GIT_TIMEOUT_S)
    except FileNotFoundError:
        return None, "no git executable on PATH"
    except subprocess.TimeoutExpired:
        return None, f"git {args[0]} in {root} took over {GIT_TIMEOUT_S} s"
    except OSError as err:
        return None, f"git could not run: {err}"
    if done.returncode:
        return None, f"git {args[0]} in {root}: " + (done.stderr.strip().splitlines() or ["failed"])[-1]
    return done.stdout, ""


def short(record: Any) -> str:
    """A code record in a word: the commit's first 7 hex digits, "+dirty" where its tree was not clean; "unknown
    (why)" where none was named; "not recorded" for anything else (a run made before runs recorded their code)."""
    if not isinstance(record, dict):
        return "not recorded"
    if isinstance(record.get("commit"), str):
        return record["commit"][:7] + ("" if record.get("clean") else "+dirty")
    return f"unknown ({record.get('why') or 'no reason recorded'})"

"""A listing of files with their sizes, modes and modification times, to show a command wrote nothing."""

from __future__ import annotations

from pathlib import Path

Listing = dict[str, tuple[int, int, int]]


def snapshot(*roots: Path) -> Listing:
    """Every file and directory under `roots` (relative to its root's parent) -> (size, mode, mtime_ns)."""
    listing: Listing = {}
    for root in roots:
        if not root.exists():
            continue
        for path in [root, *sorted(root.rglob("*"))]:
            info = path.lstat()
            listing[str(path.relative_to(root.parent))] = (info.st_size, info.st_mode, info.st_mtime_ns)
    return listing


def changes(before: Listing, after: Listing) -> list[str]:
    """Paths added, removed or altered between two listings, sorted (empty when nothing changed)."""
    return sorted(path for path in before.keys() | after.keys() if before.get(path) != after.get(path))

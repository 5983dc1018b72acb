"""The project's file I/O, the floor that eval/ and gropd/ both stand on (it imports neither): the file helpers
of results/ and experiments/: atomic writes (a temp file beside the target, renamed over it,
with the mode a plainly created file gets: mkstemp's own is 0600), JSON-lines files read back with a torn
last line tolerated, and the one YAML reader every file the project reads goes through (strict: a key given
twice in one mapping is an error, not a silent last-wins)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys
import tempfile
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path
from typing import Any

import yaml


def _file_mode() -> int:
    """0666 less the process's umask (read once: reading it means setting it)."""
    umask = os.umask(0o022)
    os.umask(umask)
    return 0o666 & ~umask


FILE_MODE = _file_mode()


class RunFileError(ValueError):
    """A file under results/ that cannot be read back: invalid, truncated, missing or edited.

    Printed as `<file>: <problem>; <what to do>`; the CLI exits 2 on it.
    """

    def __init__(self, file: str, problem: str, remedy: str):
        self.file, self.problem, self.remedy = file, problem, remedy
        super().__init__(f"{file}: {problem}; {remedy}")


def atomic_write_text(path: Path, text: str) -> None:
    """Replace `path` with `text` so that readers see the old file or the new one, never half of one."""

    def write(tmp: str) -> None:
        with open(tmp, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())

    atomic_write_with(path, write)


def atomic_write_json(path: Path, data: Any) -> None:
    """atomic_write_text of `data` as indented JSON."""
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=True) + "\n")


def atomic_write_with(path: Path, write: Callable[[str], None]) -> None:
    """Replace `path` with what `write(temp_path)` writes (for writers that want a path: torch.save, savefig)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.fchmod(fd, FILE_MODE)
    os.close(fd)
    try:
        write(tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def append_jsonl(path: Path, records: list[dict[str, Any]], sort_keys: bool = False) -> None:
    """Append `records` as JSON lines with a single write, flushed and synced (read back by read_jsonl)."""
    with path.open("a", encoding="utf-8") as handle:
        handle.write("".join(json.dumps(record, sort_keys=sort_keys) + "\n" for record in records))
        handle.flush()
        os.fsync(handle.fileno())


def read_jsonl(path: Path, remedy: str, note: bool = True) -> list[dict[str, Any]]:
    """The JSON objects of an append-only JSON-lines file, [] when it is absent.

    A last line without its newline that does not parse is a torn append: it is dropped (with a
    note on stderr when `note`). Any other line that is not a JSON object raises RunFileError.
    """
    if not path.exists():
        return []
    lines = read_text(path, remedy).split("\n")
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            if number == len(lines):
                if note:
                    print(f"note: {path}: last line is incomplete (a write cut short); ignored", file=sys.stderr)
                break
            raise RunFileError(str(path), f"line {number} is not valid JSON ({exc})", remedy) from None
        if not isinstance(record, dict):
            raise RunFileError(str(path), f"line {number} is not a JSON object", remedy)
        records.append(record)
    return records


def read_text(path: Path, remedy: str) -> str:
    """The UTF-8 text of `path`; RunFileError (naming `remedy`) when it is not UTF-8."""
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise RunFileError(str(path), f"not UTF-8 text ({exc.reason} at byte {exc.start})", remedy) from None


MAX_YAML_VALUES = 100_000  # a document's values with its aliases expanded: ~50x the largest manifest, and a
# "billion laughs" file (aliases of aliases) stops here in milliseconds instead of costing seconds and gigabytes later


def _require_bounded(root: yaml.Node) -> None:
    """yaml.YAMLError when the node graph under `root`, every alias (*name) expanded, holds over MAX_YAML_VALUES."""
    stack, count = [root], 0
    while stack:
        node = stack.pop()
        count += 1
        if count > MAX_YAML_VALUES:
            raise yaml.YAMLError(
                f"more than {MAX_YAML_VALUES:,} values once its aliases (*name) are expanded, from line "
                f"{root.start_mark.line + 1}: refused (aliases of aliases multiply; write the values out)"
            )
        if isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
        elif isinstance(node, yaml.MappingNode):
            stack.extend(value for pair in node.value for value in pair)


class _StrictLoader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """yaml.(C)SafeLoader that refuses a repeated key in a mapping and a document that its aliases blow up
    (_require_bounded), and reads 1e-4 as the float YAML 1.2 (and every user) means, not the string YAML 1.1
    makes of it."""

    def get_single_node(self) -> yaml.Node | None:
        node = super().get_single_node()
        if node is not None:
            _require_bounded(node)
        return node

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":  # `<<: *base`: keys a reader does not see where they apply
                where = f"line {key_node.start_mark.line + 1}, column {key_node.start_mark.column + 1}"
                problem = f"a YAML merge key (<<) at {where}: not read here; write the keys it would merge out"
                raise yaml.constructor.ConstructorError(problem=problem)
            key = self.construct_object(key_node, deep=True)
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    "while reading a mapping", node.start_mark, f"found the key {key!r} twice", key_node.start_mark
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)

    def construct_yaml_int(self, node: yaml.ScalarNode) -> int:
        """An integer, or a ConstructorError at its line when it is too long for Python to read (over
        sys.get_int_max_str_digits() digits: int() raises ValueError)."""
        try:
            return super().construct_yaml_int(node)
        except ValueError:
            digits = sum(char.isdigit() for char in node.value)
            mark = node.start_mark
            where = f"line {mark.line + 1}, column {mark.column + 1}"
            problem = f"an integer of {digits:,} digits at {where}: at most {sys.get_int_max_str_digits():,} are read"
            raise yaml.constructor.ConstructorError(problem=problem) from None


_StrictLoader.add_constructor("tag:yaml.org,2002:int", _StrictLoader.construct_yaml_int)
SCIENTIFIC = re.compile(r"^[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)[eE][-+]?[0-9]+$")  # 1e-4, 2.5E3
_StrictLoader.add_implicit_resolver("tag:yaml.org,2002:float", SCIENTIFIC, list("-+0123456789."))


def load_yaml(text: str) -> Any:
    """The YAML document in `text` (yaml.safe_load's result), with a repeated mapping key or an alias bomb
    refused (yaml.YAMLError naming the key or the count, and the line) and 1e-4 read as a float."""
    return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 (a SafeLoader subclass)


def file_sha256(path: Path) -> str:
    """sha256 of the file's bytes (cached per path, size and modification time)."""
    stat = path.stat()
    return _sha256(str(path.resolve()), stat.st_size, stat.st_mtime_ns)


@lru_cache(maxsize=256)
def _sha256(path: str, size: int, mtime_ns: int) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def files_under(folder: Path) -> list[str]:
    """The files under `folder` (relative, sorted), hidden ones left out."""
    found = (path.relative_to(folder) for path in folder.rglob("*") if path.is_file())
    return sorted(str(path) for path in found if not any(part.startswith(".") for part in path.parts))

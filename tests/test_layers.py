"""The package's layers (docs/DESIGN.md §4) import downward only: fileio/ imports nothing of the project, and
eval/ nothing of gropd.

Read from the source with `ast` (every import, including those inside functions), so a lazy import
that reaches up a layer fails here as a top-level one would."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
LAYERS = [  # lowest first; a module may import its own layer and those before it
    {"fileio"},
    {"eval"},
    {"gropd", "gropd.credit", "gropd.loss", "gropd.horizon", "gropd.templates", "gropd.config"},
    {"gropd.tiny"},
    {"gropd.model"},
    {"gropd.record"},
    {"gropd.train"},
    {"gropd.runs"},
    {"gropd.report"},
    {"gropd.cli"},
]

PACKAGES = ("fileio", "eval", "gropd")


def layer_of(module: str) -> int | None:
    """The index in LAYERS of the longest prefix of `module` named there; None outside the project."""
    parts = module.split(".")
    for size in range(len(parts), 0, -1):
        for index, layer in enumerate(LAYERS):
            if ".".join(parts[:size]) in layer:
                return index
    return None


def imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    found = [node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.level == 0]
    found += [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
    return [name for name in found if name]


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_every_module_has_a_layer() -> None:
    modules = [module_name(p) for package in PACKAGES for p in sorted((REPO / package).rglob("*.py"))]
    unplaced = [name for name in modules if layer_of(name) is None]
    assert not unplaced, f"modules in no layer of LAYERS: {unplaced}"


def test_no_module_imports_a_layer_above_its_own() -> None:
    upward = []
    for path in sorted(path for package in PACKAGES for path in (REPO / package).rglob("*.py")):
        own = layer_of(module_name(path))
        for name in imports(path):
            target = layer_of(name)
            if target is not None and target > own:
                upward.append(f"{path.relative_to(REPO)} imports {name}")
    assert not upward, "imports up a layer:\n" + "\n".join(upward)


def test_the_check_sees_an_upward_import(tmp_path: Path) -> None:
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from gropd.train.step import train_step\n")
    assert layer_of("gropd.model.logprobs") < max(layer_of(name) for name in imports(probe))

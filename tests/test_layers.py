"""The package's layers (docs/DESIGN.md §4) import downward only: fileio/ imports nothing of the project, and
eval/ nothing of gropd.

Read from the source with `ast` (every import, including those inside functions), so a lazy import
that reaches up a layer fails here as a top-level one would."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
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


LIGHT_COMMANDS = (  # with the exit status each gives in a fresh project (report: no finished run, refused)
    (["status"], 0),
    (["runs", "--profile", "tiny"], 0),
    (["grid", "table1", "--profile", "tiny", "--dry-run"], 0),
    (["report", "claims", "--profile", "tiny"], 2),
)


def test_commands_that_load_no_model_import_neither_torch_nor_transformers(root: Path) -> None:
    """Listing, planning and reporting read YAML and JSON: a second or two with torch and transformers
    loaded, a fraction of one without. The report package is imported whole (its command refuses here: no runs)."""
    script = (
        "import sys; from gropd import cli\n"
        f"codes = [cli.main(argv) for argv in {[argv for argv, _ in LIGHT_COMMANDS]!r}]\n"
        "print(codes, sorted(name for name in ('torch', 'transformers', 'accelerate') if name in sys.modules))"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True, text=True, env=env)
    assert done.stdout.splitlines()[-1:] == [f"{[code for _, code in LIGHT_COMMANDS]} []"], (done.stdout, done.stderr)

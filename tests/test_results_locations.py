"""Issue 53's second, third and sixth bad cases, replayed: where runs are written is decided before the first byte.
--results is resolved (links followed) and refused when empty, the repository's root, in the tiny world or in a
committed set (READ_ONLY) or a folder of one; a run id is refused when the results layout gives its name to something
else (the tiny world, a profile, another run's staging or shard lock) or its files' names would be too long."""

from __future__ import annotations

import errno
from pathlib import Path

import pytest
from scratch_clone import refused, scratch_fixture  # noqa: F401  (scratch: a fixture)
from test_front_door import RUN

from gropd.config import ConfigError, load_manifests
from gropd.config.grids import run_file_path
from gropd.runs.plan import plan_run_id

RUN_ARGS = ["run", RUN, "--profile", "tiny", "train.steps=2", "eval.questions=5"]


@pytest.mark.parametrize("command", [RUN_ARGS, RUN_ARGS + ["--force"], ["grid", "table1", "--profile", "tiny"]])
def test_a_link_or_a_subfolder_never_reaches_the_committed_runs(scratch: Path, capsys, command: list[str]) -> None:
    """rlink/tiny a link to the committed set's tiny/ (it replaced the committed run: metrics 100 lines -> 2), and
    --results results/reference/tiny (it trained into results/reference/tiny/tiny/<id>/, which git ignores)."""
    (scratch / "rlink").mkdir()
    (scratch / "rlink" / "tiny").symlink_to(scratch / "results" / "reference" / "tiny")
    for results in ("rlink", "results/reference/tiny", str(scratch / "rlink")):
        err = refused(scratch, ["--results", results, *command], capsys)
        assert "--results" in err and "inside the committed runs of" in err and "READ_ONLY" in err


@pytest.mark.parametrize("results", ["", ".", "results/tiny/world", "results/tiny/world/abc", "wlink"])
def test_an_empty_results_the_root_or_the_tiny_world_is_refused(scratch: Path, capsys, results: str) -> None:
    """`--results ''` wrote <repo>/tiny/<run_id>/ (reproduce.sh refused it, the CLI did not); the root and the
    tiny world (wlink: a link to it) alike."""
    (scratch / "wlink").symlink_to(scratch / "results" / "tiny" / "world")
    for command in (RUN_ARGS, ["grid", "table1", "--profile", "tiny"], ["evaluate", RUN, "--profile", "tiny"]):
        err = refused(scratch, ["--results", results, *command], capsys)
        assert "--results" in err
    if results == "":
        assert "--results: empty" in refused(scratch, ["--results", "", "status"], capsys)


# --- 3. run ids that collide with the results layout, or too long for its names ------------------------------------


def own_run_file(root: Path, run_id: str) -> None:
    path = run_file_path(root / "experiments", "tiny", run_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"run_id: {run_id}\nkind: train\npairing: I4nothink-I1.7nothink\nmethod: opd\n")


@pytest.mark.parametrize("run_id", ["world", "tiny", "paper", f"{RUN}.twin-tmp", f"{RUN}.shard1", "a" * 219])
def test_a_run_id_the_results_layout_gives_something_else_is_refused_when_planned(scratch, capsys, run_id) -> None:
    """A run file `world.yaml` (run_id: world) trained into results/tiny/world/, and with --force deleted every
    model there; a profile's name, another run's twin staging or shard lock, and a 219-byte id alike."""
    own_run_file(scratch, run_id)
    (scratch / "results" / "tiny" / "world" / "abc" / "model.bin").write_text("weights")
    for force in ([], ["--force"]):
        err = refused(scratch, ["run", run_id, "--profile", "tiny", *force], capsys)
        assert f"runs/tiny/{run_id}.yaml: run_id: " in err and "(expected another run id (at most 218 bytes))" in err


def test_the_longest_run_id_is_the_longest_the_filesystem_takes(scratch: Path, tmp_path: Path) -> None:
    """218 bytes is the longest id whose longest derived name (a shard's holder record's temp file in .locks/:
    '.' + id + '.shard99999.holder.json.' + 8 random + '.tmp') fits this filesystem: the names themselves, made."""
    make = lambda run_id: (tmp_path / f".{run_id}.shard99999.holder.json.abcdefgh.tmp").write_text("")  # noqa: E731
    make("a" * 218)
    with pytest.raises(OSError) as err:
        make("a" * 219)
    assert err.value.errno == errno.ENAMETOOLONG
    manifests, results = load_manifests(scratch / "experiments"), scratch / "results"
    own_run_file(scratch, "a" * 218)
    assert plan_run_id(manifests, "tiny", "a" * 218, [], results).config.run_id == "a" * 218
    own_run_file(scratch, "a" * 219)
    with pytest.raises(ConfigError, match="219 bytes"):
        plan_run_id(manifests, "tiny", "a" * 219, [], results)

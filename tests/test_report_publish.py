"""Reports at the command line: bad results input stops with exit status 2 and
a message naming the file or directory and the way out, and leaves experiments/, results/ and paper_figures/ as
they were (the artefacts of a build are published all-or-nothing); a run file edited since it ran is refused as
`grid` refuses it; a finished run without a usable summary is named in the Missing line of what it would be in."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
import yaml
from report_fixtures import P1, P3, STEPS, macro_summary, metric_rows, scored, table1_grid, write_experiments, write_run
from tree_snapshot import changes, snapshot

from gropd import cli


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A project directory (the current one): experiments/, results/ with Table 1 of P1 and P3 at one seed and a
    λ-sweep run, and paper_figures/ built from them once."""
    write_experiments(tmp_path, grids={"table1": table1_grid(P1, P3), "gamma": None, "table6": None})
    scored(tmp_path, f"table1__{P1}__gropd", [30.0])
    scored(tmp_path, f"table1__{P1}__opd", [20.0])
    write_run(
        tmp_path / "results",
        "tiny",
        f"lambda__{P1}__gropd-lam0.5",
        metrics=metric_rows(STEPS, pressure_normalised=1.0, pressure_retained=0.5),
    )
    monkeypatch.chdir(tmp_path)
    assert cli.main(["report", "table1", "table2", "--profile", "tiny"]) == 0
    return tmp_path


def refused(project: Path, argv: list[str], capsys) -> str:
    """cli.main(argv) exits 2, without a traceback, changing nothing under experiments/, results/, paper_figures/;
    returns what it printed on stderr."""
    roots = [project / name for name in ("experiments", "results", "paper_figures")]
    before = snapshot(*roots)
    capsys.readouterr()
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.startswith("error: ")
    assert changes(before, snapshot(*roots)) == []
    return err


@pytest.mark.parametrize("where", ["missing", "empty", "a file", "no runs of the grid"])
def test_no_finished_run_stops_naming_the_directory_and_the_committed_runs(project, capsys, where):
    results = {"missing": project / "nowhere", "empty": project / "empty", "a file": project / "notes.txt"}
    (project / "empty").mkdir()
    (project / "notes.txt").write_text("not results")
    argv = ["report", "table1", "--profile", "tiny"]
    if where == "no runs of the grid":
        for run in (project / "results" / "tiny").glob("table1__*"):
            run.rename(project / "results" / run.name)  # results/tiny/ holds only the λ-sweep run now
        argv = ["report", "fig4", "--profile", "tiny"]
    else:
        argv = ["--results", str(results[where]), *argv]
    err = refused(project, argv, capsys)
    expected = {
        "missing": f"{project / 'nowhere' / 'tiny'} does not exist",
        "empty": f"{project / 'empty' / 'tiny'} does not exist",
        "a file": f"error: {project / 'notes.txt'}: --results: {project / 'notes.txt'} is a file",
        "no runs of the grid": "no finished run of grid gamma in results/tiny",
    }[where]
    assert expected in err and "nothing was written" in err and "`--results results/reference`" in err


def test_one_corrupt_status_json_leaves_paper_figures_as_it_was(project, capsys):
    (project / "results" / "tiny" / f"lambda__{P1}__gropd-lam0.5" / "status.json").write_text("{bad json")
    err = refused(project, ["report", "table1", "table2", "claims", "--profile", "tiny"], capsys)
    assert f"lambda__{P1}__gropd-lam0.5/status.json: not valid JSON" in err


def test_a_config_yaml_edited_since_the_run_is_refused_as_grid_refuses_it(project, capsys):
    config = project / "results" / "tiny" / f"table1__{P1}__opd" / "config.yaml"
    data = yaml.safe_load(config.read_text())
    data["train"]["optimizer"]["lr"] = 1.0
    config.write_text(yaml.safe_dump(data))
    err = refused(project, ["report", "table1", "--profile", "tiny"], capsys)
    assert f"table1__{P1}__opd/config.yaml: does not match config_hash" in err and "--force" in err


def test_a_summary_that_is_not_json_is_an_error_naming_it(project, capsys):
    (project / "results" / "tiny" / f"table1__{P1}__gropd" / "eval" / "summary.json").write_text("{oops")
    err = refused(project, ["report", "table1", "--profile", "tiny"], capsys)
    assert f"table1__{P1}__gropd/eval/summary.json: not valid JSON" in err


@pytest.mark.parametrize("summary", [None, {"model": "m"}])
def test_a_finished_run_without_a_usable_summary_is_named_in_missing(project, capsys, summary):
    path = project / "results" / "tiny" / f"table1__{P1}__opd" / "eval" / "summary.json"
    path.unlink() if summary is None else path.write_text(json.dumps(summary))
    before = snapshot(project / "experiments", project / "results")
    assert cli.main(["report", "table1", "--profile", "tiny"]) == 0
    assert changes(before, snapshot(project / "experiments", project / "results")) == []
    table = (project / "paper_figures" / "tiny" / "table1.md").read_text()
    path = f"results/tiny/table1__{P1}__opd/eval/summary.json"
    line = f"finished, but {path} is missing" if summary is None else f"{path} has no suites"
    assert f"- `table1__{P1}__opd`: {line}" in table
    assert "| I4nothink→I1.7nothink | vanilla OPD | 0 |" in table


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (["report", "tableX", "--profile", "tiny"], "unknown artefact tableX (expected one of table1"),
        (["report", "table1", "--profile", "foo"], "'foo' is not a profile"),
    ],
)
def test_unknown_artefact_or_profile(project, capsys, argv, words):
    assert words in refused(project, argv, capsys)


def test_a_good_build_replaces_every_file_it_names(project):
    scored(project, f"table1__{P3}__gropd", [5.0])
    assert cli.main(["report", "table1", "--profile", "tiny"]) == 0
    assert (
        "| I4think→B1.7 | GR-OPD (λ=0, γ=0.99) | 1 | 4.00 |"
        in (project / "paper_figures" / "tiny" / "table1.md").read_text()
    )
    assert (
        json.loads((project / "paper_figures" / "tiny" / "table1.provenance.json").read_text())["results_root"]
        == "results"
    )
    assert macro_summary(5.0)["suites"]["add"]["avg_at_k"] == 4.0


def test_a_link_whose_set_was_removed_is_replaced_by_the_next_build(project):
    """A user who deleted paper_figures/.tiny.* by hand leaves paper_figures/tiny dangling: the next build publishes
    a set of its own files (before, every later build failed naming the missing set)."""
    published = project / "paper_figures" / "tiny"
    shutil.rmtree(published.resolve())
    assert published.is_symlink() and not published.exists()
    assert cli.main(["report", "table1", "--profile", "tiny"]) == 0
    assert (published / "table1.md").is_file() and not (published / "table2.md").exists()


def test_a_build_keeps_its_own_set_where_mkdtemp_returns_absolute_paths(project, monkeypatch):
    """Python 3.12's tempfile.mkdtemp returns an absolute path even for a relative `dir` (its documentation:
    "Changed in version 3.12: mkdtemp() now always returns an absolute path"), modelled here on any Python: the
    cleanup after the swap must not take the new set for a leftover (it did: every build left a dangling link)."""
    real = tempfile.mkdtemp
    monkeypatch.setattr(tempfile, "mkdtemp", lambda *args, **kwargs: os.path.abspath(real(*args, **kwargs)))
    assert cli.main(["report", "table1", "--profile", "tiny"]) == 0
    assert (project / "paper_figures" / "tiny" / "table1.md").is_file()
    assert len(list((project / "paper_figures").glob(".tiny.*"))) == 1  # the published set alone


def test_a_set_is_built_from_one_results_directory(project, capsys):
    """Table 1 and 2 built from results/, then Table 1 from a copy elsewhere: Table 2 (built from results/) leaves
    the set, said on stderr; before, the set mixed the two directories without a word."""
    shutil.copytree(project / "results", project / "other")
    published = project / "paper_figures" / "tiny"
    assert (published / "table2.md").is_file()
    capsys.readouterr()
    assert cli.main(["--results", "other", "report", "table1", "--profile", "tiny"]) == 0
    assert "note: table2 (table2.md, table2.tex, table2.csv) was built from results, this build reads other" in (
        capsys.readouterr().err
    )
    roots = {json.loads(p.read_text())["results_root"] for p in published.glob("*.provenance.json")}
    assert roots == {"other"} and not list(published.glob("table2.*"))
    assert (published / "table1.md").is_file()

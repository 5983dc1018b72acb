"""The front door: a bad input anywhere on the command line stops with exit status 2 and a
message naming the flag or file, the key and what is expected, before anything is written: nothing
under experiments/, results/ or paper_figures/ changes (tests/tree_snapshot.py).

Three ways in, fastest first: reproduce.sh's own checks (they stop before .venv is even looked at, so
the clone here has none: a check that came too late would try to make one), `gropd.cli` in this
process, and a few whole `./reproduce.sh` commands through Python.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from test_reproduce_sh import REPO, bash, copy_with_venv
from tree_snapshot import changes, snapshot

from gropd import cli
from gropd.config import ConfigError, config_hash, config_yaml, load_manifests
from gropd.config.lock import cached_revision, pin, read_lock
from gropd.record.run_dir import RunDir
from gropd.runs.pipeline import load_run

RUN = "table1__I4nothink-I1.7nothink__gropd"
SECOND = "table1__I4nothink-I1.7nothink__opd"  # the grid's second run


def clone(tmp_path: Path, venv: bool = True) -> Path:
    """A fresh clone's layout: reproduce.sh, experiments/ (no run files, no lock), paper_figures/ and
    results/ (the tiny world linked, as committed)."""
    copy_with_venv(tmp_path, venv=venv)
    shutil.copytree(REPO / "experiments", tmp_path / "experiments", ignore=shutil.ignore_patterns("runs", "lock.yaml"))
    (tmp_path / "paper_figures").mkdir()
    (tmp_path / "paper_figures" / "README.md").write_text("artefacts\n")
    (tmp_path / "results" / "tiny").mkdir(parents=True)
    os.symlink(REPO / "results" / "tiny" / "world", tmp_path / "results" / "tiny" / "world")
    return tmp_path


def tree(root: Path) -> dict:
    return snapshot(root / "experiments", root / "results", root / "paper_figures")


def refused(root: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """`./reproduce.sh ARGS` in `root`: exit 2, no traceback, nothing written; returns stderr."""
    before = tree(root)
    result = bash(root / "reproduce.sh", *args, cwd=root, env=env)
    assert result.returncode == 2, (args, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr and "unbound variable" not in result.stderr
    assert changes(before, tree(root)) == []
    return result.stderr


# --- reproduce.sh's own checks: before .venv, Python or anything else ----------------------------------

SHELL_REFUSALS = [
    (["table1", "--profile"], "--profile needs a value (one of paper rehearsal tiny tiny-long)"),
    (["table1", "--seeds"], "--seeds needs a value (an integer N >= 1)"),
    (["table1", "--jobs"], "--jobs needs a value"),
    (["table1", "--results"], "--results needs a value (a results directory"),
    (["table1", "--profile", "--seeds", "3"], "--profile needs a value"),
    (["table1", "--results="], "--results needs a value"),
    (["table1", "--profile="], "--profile needs a value"),
    (["table1", "--seeds", "0"], "--seeds 0 is not a positive integer (expected an integer N >= 1)"),
    (["table1", "--seeds", "-1"], "--seeds -1 is not a positive integer"),
    (["table1", "--seeds=abc"], "--seeds abc is not a positive integer"),
    (["table1", "--jobs", "0"], "--jobs 0 is not a positive integer"),
    (["table1", "--bogus"], "unknown flag '--bogus' (flags: --profile --seeds"),
    (["table1", "-x"], "unknown flag '-x'"),
    (["table1", "table2"], "unexpected argument 'table2' (one target at a time; a setting is key.path=value"),
    (["table1", "gropd.lam"], "unexpected argument 'gropd.lam'"),
    (["table1", "--profile", "tiny", "--profile", "paper"], "--profile given twice"),
    (["status", "--seeds", "3"], "--seeds does not apply to 'status' (it takes: --profile --results key.path=value)"),
    (["pin", "--jobs", "2"], "--jobs does not apply to 'pin' (it takes: --profile)"),
    (["world", "--seeds", "3"], "--seeds does not apply to 'world' (it takes: --profile)"),
    (["rehearse", "--fast"], "--fast does not apply to 'rehearse'"),
    (["table1", "--fast"], "--fast does not apply to 'table1'"),
    (["claims", "--force"], "--force does not apply to 'claims'"),
    (["runs", "--dry-run"], "--dry-run does not apply to 'runs'"),
    (["claims", "gropd.lam=0.5"], "key.path=value does not apply to 'claims'"),
    (["table1", "--from-results", "--dry-run"], "--dry-run does not apply with --from-results, which runs nothing"),
    (["table1", "--from-results", "--seeds", "3"], "--seeds does not apply with --from-results"),
    (["all", "--from-results", "--force"], "--force does not apply with --from-results"),
    (["table1", "--from-results", "gropd.lam=0.5"], "key.path=value does not apply with --from-results"),
    (["test", "--fast", "--fast"], "--fast given twice"),
]


@pytest.mark.parametrize(("args", "message"), SHELL_REFUSALS, ids=[" ".join(a) for a, _ in SHELL_REFUSALS])
def test_reproduce_sh_refuses_its_own_bad_flags_before_anything(tmp_path: Path, args: list[str], message: str) -> None:
    root = clone(tmp_path, venv=False)
    err = refused(root, *args)
    assert err.startswith("reproduce.sh: ") and message in err and err.count("\n") == 1, err
    assert not (root / ".venv").exists()  # stopped before ensure_venv: no environment made, no Python started


# --- gropd.cli, in this process ------------------------------------------------------------------------


def cli_refused(root: Path, argv: list[str], capsys: pytest.CaptureFixture) -> str:
    """cli.main(argv) in `root`: exit 2, nothing written; returns stderr."""
    before = tree(root)
    capsys.readouterr()
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert changes(before, tree(root)) == []
    return err


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = clone(tmp_path, venv=False)
    monkeypatch.chdir(root)
    return root


CLI_REFUSALS = [
    (["runs", "--profile", "foo"], "command line: --profile: 'foo' is not a profile (expected one of paper"),
    (["grid", "table1", "--profile", "foo", "--dry-run"], "command line: --profile: 'foo' is not a profile"),
    (["status", "--profile", "tiny", "--profile", "foo"], "command line: --profile: 'foo' is not a profile"),
    (["report", "table1", "--profile", "foo"], "command line: --profile: 'foo' is not a profile"),
    (["pin", "--profile", "foo"], "command line: --profile: 'foo' is not a profile"),
    (["report", "tableX", "--profile", "tiny"], "command line: report: unknown artefact tableX (expected one of"),
    (["run", RUN, "--profile", "tiny", "gropd.lam=.inf"], "command line: gropd.lam: Input should be a finite number"),
    (["run", RUN, "--profile", "tiny", "gropd.lam=inf"], "command line: gropd.lam: Input should be a valid number"),
    (
        ["run", RUN, "--profile", "tiny", "train.optimizer.lr=.inf"],
        "command line: train.optimizer.lr: Input should be a finite number",
    ),
    (
        ["run", RUN, "--profile", "tiny", "gropd.gamma=.nan"],
        "command line: gropd.gamma: Input should be a finite number",
    ),
    (["run", RUN, "--profile", "tiny", "sampling.temperature=-.inf"], "command line: sampling.temperature: Input"),
    (
        ["run", RUN, "--profile", "tiny", "train.group_size=1"],
        "command line: train.group_size: G = 1 (expected G >= 2 for GR-OPD",
    ),
    (
        ["run", RUN, "--profile", "tiny", "train.group_size=1", "train.prompts_per_batch=3"],
        "command line: train.group_size: G = 1 (expected G >= 2 for GR-OPD",
    ),
    (
        ["run", "table1__nosuch__gropd", "--profile", "tiny"],
        "experiments/runs/tiny/table1__nosuch__gropd.yaml: run_id: no run",
    ),
    (["--results", "reproduce.sh", "runs"], "command line: --results: 'reproduce.sh' is a file (expected a results"),
    (["--results", "nowhere", "status"], "command line: --results: 'nowhere' does not exist"),
]


@pytest.mark.parametrize(("argv", "message"), CLI_REFUSALS, ids=[" ".join(a) for a, _ in CLI_REFUSALS])
def test_cli_refuses_bad_input_before_writing(project: Path, argv: list[str], message: str, capsys) -> None:
    assert f"error: {message}" in cli_refused(project, argv, capsys)


def test_a_minibatch_arithmetic_error_names_its_numbers_not_the_whole_section(project: Path, capsys) -> None:
    """(G = 1 with a rollout no minibatch divides gets the G message: CLI_REFUSALS.)"""
    err = cli_refused(project, ["run", SECOND, "--profile", "tiny", "train.group_size=3"], capsys)
    assert "must hold whole groups of group_size=3" in err and "'optimizer'" not in err and "{" not in err


def write_run_file(root: Path, text: str) -> Path:
    path = root / "experiments" / "runs" / "tiny" / f"{RUN}.yaml"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("latin-1"))
    return path


RUN_FILES = [
    ("run_id: other\n", "run_id: 'other' (expected 'table1__I4nothink-I1.7nothink__gropd' (the file's name))"),
    ("", "run_id: missing (expected 'table1__I4nothink-I1.7nothink__gropd' (the file's name))"),
    (f"run_id: {RUN}\n", "pairing: missing for a train run"),
    (f"run_id: {RUN}\ngropd: {{lam: .inf}}\n", "gropd.lam: Input should be a finite number"),
    ("\xff\xfe", "<top level>: not UTF-8 text"),
]


@pytest.mark.parametrize(("text", "message"), RUN_FILES, ids=["run_id", "empty", "no-pairing", "inf", "not-utf8"])
@pytest.mark.parametrize("command", ["run", "grid", "runs", "status"])
def test_a_bad_run_file_is_named_in_every_message(project: Path, text: str, message: str, command: str, capsys) -> None:
    path = write_run_file(project, text)
    argv = {
        "run": ["run", RUN, "--profile", "tiny"],
        "grid": ["grid", "table1", "--profile", "tiny", "--dry-run"],
        "runs": ["runs", "--profile", "tiny", "--grid", "table1"],
        "status": ["status", "--profile", "tiny"],
    }[command]
    if command == "status":  # status shows it broken, with the same message, and goes on
        assert cli.main(argv) == 0
        line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith(RUN + " "))
        assert line.split()[1] == "broken" and f"{path.relative_to(project)}: {message}" in line
        return
    assert f"error: {path.relative_to(project)}: {message}" in cli_refused(project, argv, capsys)


def finished(root: Path, run_id: str, **status) -> RunDir:
    """A finished run's files as the pipeline leaves them (config.yaml, status.json)."""
    config = load_run(load_manifests(root / "experiments"), "tiny", run_id)
    shutil.rmtree(root / "experiments" / "runs")  # as a fresh clone: the run files are generated later
    run_dir = RunDir(root / "results" / "tiny" / run_id)
    run_dir.write_config(config_yaml(config))
    status = {"run_id": run_id, "kind": "train", "status": "finished", "config_hash": config_hash(config), **status}
    run_dir.update_status(**status)
    return run_dir


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_a_grid_checks_every_run_before_the_first_starts(project: Path, jobs: str, capsys) -> None:
    """The grid's second run changed, or its status.json broken: exit 2 before the first run starts
    (before, the first trained and then the grid stopped at the second) and before any run file is written."""
    argv = ["grid", "table1", "--profile", "tiny", "--jobs", jobs]
    finished(project, SECOND, config_hash="0" * 16)
    err = cli_refused(project, argv, capsys)
    assert f"results/tiny/{SECOND}/status.json: config_hash / checkpoints: run {SECOND} started with config" in err
    assert "--force" in err
    (project / "results" / "tiny" / SECOND / "status.json").write_text('{"status": "fini')
    assert f"results/tiny/{SECOND}/status.json: not valid JSON" in cli_refused(project, argv, capsys)


def test_paper_dry_run_says_which_runs_would_be_refused(project: Path, capsys) -> None:
    err = cli_refused(project, ["grid", "table1", "--profile", "paper", "--dry-run"], capsys)
    assert f"{RUN}: new, would be refused (below)" in err and "./reproduce.sh pin" in err
    for student, runs in (("Qwen/Qwen3-1.7B", 4), ("Qwen/Qwen3-1.7B-Base", 6)):  # one line a reason
        assert (
            f"would be refused ({runs} of 10 runs): error: experiments/lock.yaml: models.{student}: not pinned" in err
        )


def test_tiny_dry_run_and_runs_write_what_they_say(project: Path, capsys) -> None:
    """--dry-run writes nothing, not even run files; `runs` writes the run files (its job) and nothing else."""
    before = tree(project)
    assert cli.main(["grid", "table1", "--profile", "tiny", "--dry-run"]) == 0
    assert changes(before, tree(project)) == []
    assert cli.main(["runs", "--profile", "tiny", "--grid", "table1"]) == 0
    listed = [f"experiments/runs/tiny/{line.split()[0]}.yaml" for line in capsys.readouterr().out.splitlines()]
    assert len(listed) == 10
    assert changes(before, tree(project)) == [
        "experiments",
        "experiments/runs",
        "experiments/runs/tiny",
        *sorted(listed),
    ]


def test_status_of_a_fresh_clone_and_an_edited_config(project: Path, capsys) -> None:
    assert cli.main(["status"]) == 0
    assert capsys.readouterr().out.startswith("no runs under results/ yet")  # not 3 x 38 "new" rows
    run_dir = finished(project, RUN, wall_s=5.0)
    assert cli.main(["status"]) == 0
    out = capsys.readouterr().out
    assert "profile tiny" in out and "profile paper" not in out and f"{RUN} " in out
    for damage in ("gropd:\n  lam: 0.3\n", "gropd: [unclosed\n"):  # edited off its hash; not YAML
        run_dir.config_path.write_text(run_dir.config_path.read_text() + damage)
        assert cli.main(["status", "--profile", "tiny"]) == 0
        line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith(RUN + " "))
        assert line.split()[1] == "broken" and "config.yaml" in line, line
        run_dir.write_config(config_yaml(load_run(load_manifests(project / "experiments"), "tiny", RUN)))


# --- the lock ------------------------------------------------------------------------------------------


def fake_hub_cache(cache: Path, repos: dict[tuple[str, str], str]) -> None:
    """A Hub cache as huggingface_hub lays it out: <type>s--org--name/snapshots/<full id>/, refs/main."""
    for (repo_type, repo), full in repos.items():
        folder = cache / f"{repo_type}s--{repo.replace('/', '--')}"
        (folder / "snapshots" / full).mkdir(parents=True)
        (folder / "snapshots" / full / "config.json").write_text("{}")
        (folder / "refs").mkdir()
        (folder / "refs" / "main").write_text(full)


def test_pin_touches_only_its_profile_and_refuses_one_without_the_hub(project: Path, capsys) -> None:
    lock_path = project / "experiments" / "lock.yaml"
    lock_path.write_text(yaml.safe_dump({"models": {"someone/else": {"short": "abc1234", "full": "a" * 40}}}))
    err = cli_refused(project, ["pin", "--profile", "tiny"], capsys)
    assert "--profile: 'tiny' has no model or dataset on the Hub: nothing to pin (expected a profile with Hub" in err
    manifests = load_manifests(project / "experiments")
    models = {
        ("model", record["source"]["repo"]): (str(record["source"]["revision"]) + "0" * 40)[:40]
        for record in manifests.models["paper"].values()
    }
    datasets = {("dataset", source["repo"]): "d" * 40 for source in _paper_datasets(manifests)}
    fake_hub_cache(project / "hub", {**models, **datasets})
    pin(manifests, "paper", lock_path, resolver=lambda *repo: cached_revision(project / "hub", *repo))
    lock = read_lock(lock_path)
    assert lock["models"]["someone/else"]["full"] == "a" * 40  # another profile's pin stays
    assert lock["models"]["Qwen/Qwen3-4B"] == {"short": "1cfa9a7", "full": "1cfa9a7" + "0" * 33}
    assert all(entry["full"] == "d" * 40 for entry in lock["datasets"].values()) and lock["datasets"]
    with pytest.raises(ConfigError, match=r"hub: Qwen/Qwen9@abcdef0: HF_HUB_OFFLINE is set and the local Hub cache"):
        cached_revision(project / "hub", "model", "Qwen/Qwen9", "abcdef0")


def _paper_datasets(manifests) -> list[dict]:
    from gropd.config.lock import hub_sources

    return hub_sources(manifests, "paper")[1]


def test_a_broken_lock_is_named(project: Path, capsys) -> None:
    lock_path = project / "experiments" / "lock.yaml"
    lock_path.write_text("models: [1, 2]\n")
    assert "experiments/lock.yaml: models: is list (expected a mapping repo -> pin)" in cli_refused(
        project, ["grid", "table1", "--profile", "paper", "--dry-run"], capsys
    )


def test_pin_without_network_is_one_line_naming_the_host(tmp_path: Path) -> None:
    """No network (here: a Hub address nothing listens on, so nothing is downloaded): one line naming the
    host and how to pin offline (offline with an empty cache: test above, cached_revision)."""
    root = clone(tmp_path)
    env = {"HF_ENDPOINT": "http://127.0.0.1:9", "HF_HUB_CACHE": str(tmp_path / "cache"), "HF_HUB_OFFLINE": "0"}
    err = refused(root, "pin", env=env)
    assert err.count("\n") == 1 and err.startswith("error: http://127.0.0.1:9: Qwen/Qwen3-1.7B-Base@ea980cb: cannot")
    assert "HF_HUB_OFFLINE=1" in err and "local cache" in err


# --- whole commands through reproduce.sh -----------------------------------------------------------------


def test_reproduce_sh_unknown_profile_and_dry_run_write_nothing(tmp_path: Path) -> None:
    root = clone(tmp_path)
    err = refused(root, "table1", "--profile", "foo")
    expected = "(expected one of paper, rehearsal, tiny, tiny-long)"
    assert err == f"error: command line: --profile: 'foo' is not a profile {expected}\n"
    before = tree(root)
    result = bash(root / "reproduce.sh", "table1", "--profile", "tiny", "--dry-run", cwd=root)
    assert result.returncode == 0 and f"{RUN}: new" in result.stderr
    assert changes(before, tree(root)) == []  # no run files either


def test_commands_that_run_nothing_do_not_announce_jobs(tmp_path: Path) -> None:
    root = clone(tmp_path)
    for args in (["status"], ["runs", "--profile", "tiny", "--seeds", "1"]):
        result = bash(root / "reproduce.sh", *args, cwd=root)
        assert result.returncode == 0 and "--jobs" not in result.stderr, (args, result.stderr)
    for args in (["claims"], ["table1", "--from-results"]):
        assert "--jobs" not in refused(root, *args), args


def test_a_fresh_clones_from_results_stops_and_points_at_the_committed_runs(tmp_path: Path) -> None:
    """What a newcomer types first: no table replaced by an empty one, and where the README's runs are."""
    err = refused(clone(tmp_path), "table1", "--from-results")
    assert "no finished run of grid table1" in err and "--results results/reference" in err, err


def test_generated_files_get_the_umask_mode(tmp_path: Path) -> None:
    """Atomic writes go through mkstemp (0600); the published file has what a plain open() would give."""
    script = (
        "import os, sys; from pathlib import Path; os.umask(0o027); from fileio import atomic_write_text, "
        "atomic_write_with; atomic_write_text(Path(sys.argv[1]) / 'a.txt', 'x'); "
        "atomic_write_with(Path(sys.argv[1]) / 'b.bin', lambda p: Path(p).write_bytes(b'y'))"
    )
    subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)], check=True, env={**os.environ, "PYTHONPATH": str(REPO)}
    )
    assert {path.name: path.stat().st_mode & 0o777 for path in tmp_path.iterdir()} == {"a.txt": 0o640, "b.bin": 0o640}

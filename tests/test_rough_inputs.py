"""Rough inputs of the fourth front-door round (issue 53): each replayed on a scratch project (tmp_path) and
answered with a one-line error, or with the right behaviour, never a traceback or a misleading line."""

from __future__ import annotations

import json
import shutil
import socket
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import yaml
from test_front_door import cli_refused, clone, tree
from tiny_runs import FAST, REPO, project
from tree_snapshot import changes

from gropd import cli
from gropd.record.run_dir import RunDir
from gropd.runs.session import STALE_AFTER_S, is_alive

RUN = "table1__I4nothink-I1.7nothink__gropd"
OTHER = "table1__I4nothink-I1.7nothink__opd"
REFERENCE = REPO / "results" / "reference" / "tiny"
BIG = "1" * 5000  # over Python's 4,300-digit limit on int() of a string


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh clone's layout (tests/test_front_door.py: clone) as the current directory: its tiny profile as
    committed, so copies of the committed runs keep their config hashes."""
    monkeypatch.chdir(clone(tmp_path, venv=False))
    return tmp_path


def committed(root: Path, *run_ids: str) -> dict[str, Path]:
    """Copies of committed reference runs in the project's results/tiny/; run id -> its status.json."""
    for run_id in run_ids:
        shutil.copytree(REFERENCE / run_id, root / "results" / "tiny" / run_id)
    return {run_id: root / "results" / "tiny" / run_id / "status.json" for run_id in run_ids}


def status_table(capsys: pytest.CaptureFixture) -> dict[str, str]:
    """`status --profile tiny` (exit 0): run id -> its whole line."""
    capsys.readouterr()
    assert cli.main(["status", "--profile", "tiny"]) == 0
    return {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[2:-1]}


# --- integers too long to read ---------------------------------------------------------------------------

COMMANDS = {
    "run": ["run", RUN, "--profile", "tiny"],
    "grid": ["grid", "table1", "--profile", "tiny", "--dry-run"],
    "runs": ["runs", "--profile", "tiny", "--grid", "table1"],
    "status": ["status", "--profile", "tiny"],
}


@pytest.mark.parametrize("command", COMMANDS)
def test_an_integer_over_4300_digits_on_the_command_line_is_one_line(root: Path, command: str, capsys) -> None:
    capsys.readouterr()
    assert cli.main([*COMMANDS[command], f"train.steps={BIG}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and len(err) < 300, err
    assert err.startswith(f"error: command line: train.steps: value {'1' * 30!r}... (5,000 characters) is not valid")
    assert "an integer of 5,000 digits at line 1, column 1: at most 4,300 are read" in err


@pytest.mark.parametrize("command", COMMANDS)
def test_an_integer_over_4300_digits_in_a_run_file_names_the_file(root: Path, command: str, capsys) -> None:
    path = root / "experiments" / "runs" / "tiny" / f"{RUN}.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(f"run_id: {RUN}\npairing: I4nothink-I1.7nothink\ntrain:\n  steps: {BIG}\n")
    expected = (
        f"experiments/runs/tiny/{RUN}.yaml: <top level>: not valid YAML: "
        "an integer of 5,000 digits at line 4, column 10: at most 4,300 are read"
    )
    capsys.readouterr()
    if command == "status":  # its row is broken, the table goes on
        assert status_table(capsys)[RUN].split()[1:3] == ["broken", expected.split()[0]]
        return
    assert cli.main(COMMANDS[command]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {expected}\n"


# --- a thread count no machine has ------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["run", "grid"])
def test_a_thread_count_past_1024_is_refused_before_anything(root: Path, command: str, capsys) -> None:
    """(100000 passed the front door; torch took it and OpenBLAS died of it, rc 139, status left "running".)"""
    err = cli_refused(root, [*COMMANDS[command], "backend.threads=100000"], capsys)
    assert err == "error: command line: backend.threads: Input should be less than or equal to 1024 (got 100000)\n"
    assert cli.main(["grid", "table1", "--profile", "tiny", "--dry-run", "backend.threads=1024"]) == 0


# --- a hand-edited status.json ---------------------------------------------------------------------------

EDITS = [
    ({"wall_s": float("inf")}, "wall_s inf is not a wall time (expected a finite number of seconds >= 0)"),
    ({"wall_s": float("nan")}, "wall_s nan is not a wall time (expected a finite number of seconds >= 0)"),
    ({"wall_s": -3}, "wall_s -3 is not a wall time (expected a finite number of seconds >= 0)"),
    ({"pid": 10**20}, f"pid {10**20} is not a process id (expected an integer from 1 to {2**31 - 1})"),
    ({"pid": -1}, f"pid -1 is not a process id (expected an integer from 1 to {2**31 - 1})"),
    ({"pid": 0}, f"pid 0 is not a process id (expected an integer from 1 to {2**31 - 1})"),
    ({"pid": True}, f"pid True is not a process id (expected an integer from 1 to {2**31 - 1})"),
]


@pytest.mark.parametrize(("edit", "problem"), EDITS, ids=[str(e) for e, _ in EDITS])
def test_a_hand_edited_status_json_is_one_broken_row(root: Path, edit: dict, problem: str, capsys) -> None:
    """json.dumps writes inf/nan as Infinity/NaN, as a hand edit would; a running record of this host with pid
    -1 or 0 was "running" (kill(-1, 0) and kill(0, 0) succeed)."""
    paths = committed(root, RUN, OTHER)
    status = json.loads(paths[RUN].read_text())
    status.update(edit, status="running", host=socket.gethostname())
    paths[RUN].write_text(json.dumps(status))
    table = status_table(capsys)
    assert table[RUN].split()[1] == "broken" and f"results/tiny/{RUN}/status.json: {problem}; delete" in table[RUN]
    assert table[OTHER].split()[1] == "finished"
    assert cli.main(["run", RUN, "--profile", "tiny"]) == 2  # (grid and run refuse it the same way)
    assert f"error: results/tiny/{RUN}/status.json: {problem}" in capsys.readouterr().err


def test_an_integer_over_4300_digits_in_status_json_is_one_broken_row(root: Path, capsys) -> None:
    path = committed(root, RUN, OTHER)[RUN]
    path.write_text(path.read_text().replace('"step": 100', f'"step": {BIG}', 1))
    table = status_table(capsys)
    assert table[RUN].split()[1] == "broken"
    assert f"results/tiny/{RUN}/status.json: not valid JSON (Exceeds the limit (4300 digits)" in table[RUN]
    assert table[OTHER].split()[1] == "finished"


def test_a_directory_for_summary_json_is_one_broken_row(root: Path, capsys) -> None:
    summary = committed(root, RUN, OTHER)[RUN].parent / "eval" / "summary.json"
    summary.unlink()
    summary.mkdir()
    table = status_table(capsys)
    assert table[RUN].split()[1] == "broken"
    assert f"results/tiny/{RUN}/eval/summary.json: cannot be read (Is a directory); delete" in table[RUN]
    assert table[OTHER].split()[1] == "finished"


@pytest.mark.parametrize("pid", [-1, 0, 10**20])
def test_a_pid_that_is_no_process_is_not_alive(pid: int) -> None:
    assert not is_alive({"pid": pid, "host": socket.gethostname(), "status": "running"})


# --- `updated` carries its zone ------------------------------------------------------------------------------

ZONES = ["UTC", "America/Los_Angeles", "Asia/Kolkata"]


@pytest.fixture
def zone(monkeypatch: pytest.MonkeyPatch):
    """Set this process's time zone: zone("America/Los_Angeles"); put back after the test."""

    def set_zone(name: str) -> None:
        monkeypatch.setenv("TZ", name)
        time.tzset()

    yield set_zone
    monkeypatch.undo()
    time.tzset()


@pytest.mark.parametrize("writer", ZONES)
def test_whether_another_hosts_run_is_alive_does_not_depend_on_the_readers_zone(tmp_path: Path, zone, writer) -> None:
    """A run dead 8.5 h showed "running" under America/Los_Angeles (the record was local time without a zone)."""
    zone(writer)
    run_dir = RunDir(tmp_path / "run")
    status = run_dir.update_status(status="running", config_hash="0" * 16, pid=1, host=socket.gethostname() + "-x")
    written = datetime.fromisoformat(status["updated"])
    assert written.utcoffset() == timedelta(0) and status["updated"].endswith("+00:00")
    assert abs(written.timestamp() - time.time()) < 5
    now = time.time()
    for reader in ZONES:
        zone(reader)
        assert is_alive(status, now)
        assert is_alive(status, now + STALE_AFTER_S - 60)
        assert not is_alive(status, now + 8.5 * 3600)


def test_an_updated_without_a_zone_is_read_as_the_readers_local_time(zone) -> None:
    """Records written before `updated` had a zone: the writer's local time, which is unknown; read as the reader's."""
    when = datetime(2026, 7, 1, 12, 0, 0)  # noon, no zone
    other_host = {"pid": 1, "host": socket.gethostname() + "-x", "updated": when.isoformat()}
    for reader, offset_h in (("UTC", 0), ("America/Los_Angeles", -7), ("Asia/Kolkata", 5.5)):  # (July: PDT)
        zone(reader)
        read = datetime(2026, 7, 1, 12, 0, 0, tzinfo=UTC).timestamp() - offset_h * 3600
        assert is_alive(other_host, read + STALE_AFTER_S - 1) and not is_alive(other_host, read + STALE_AFTER_S + 1)
    assert not is_alive({**other_host, "updated": "yesterday"}, time.time())


# --- a full disk -------------------------------------------------------------------------------------------

DISK_FULL = "Error while serializing: I/O error: No space left on device (os error 28)"  # (safetensors' own words)


def test_a_full_disk_while_saving_a_checkpoint_is_one_line(tmp_path: Path, monkeypatch, capsys) -> None:
    """Faked where every safetensors write goes through (accelerate's save_state, save_pretrained); the run is
    recorded failed, and resumes once there is room."""
    import safetensors.torch
    from safetensors import SafetensorError

    def full(*args, **kwargs):
        raise SafetensorError(DISK_FULL)

    monkeypatch.chdir(project(tmp_path))  # (native numerics: this process trains)
    monkeypatch.setattr(safetensors.torch, "serialize_file", full)
    capsys.readouterr()
    assert cli.main(["run", RUN, "--profile", "tiny", *FAST, "train.steps=1"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert [line for line in err if line.startswith(("error", "Traceback"))] == [err[-1]]
    assert err[-1].startswith("error: a write under results/ failed, ") and "MiB free there now" in err[-1]
    assert err[-1].endswith(
        f"(SafetensorError: {DISK_FULL}): make room and run it again (a run resumes from its last checkpoint)"
    )
    status = json.loads((Path("results") / "tiny" / RUN / "status.json").read_text())
    assert (status["status"], status["reason"]) == ("failed", f"SafetensorError: {DISK_FULL}")


def test_only_a_librarys_failed_write_is_taken_for_one() -> None:
    zip_writer = RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 576 vs 534")  # (torch.save)
    assert cli.failed_write(zip_writer) == f"RuntimeError: {zip_writer}"
    assert (
        cli.failed_write(RuntimeError("PytorchStreamReader failed reading zip archive (inline_container.cc)")) is None
    )
    assert cli.failed_write(RuntimeError("boom")) is None


# --- a dry run reads only ------------------------------------------------------------------------------------


def test_a_dry_run_writes_nothing_under_locks_and_still_sees_a_held_lock(root: Path, capsys) -> None:
    """A results directory where runs were made has lock files; `grid --dry-run` wrote .locks/.flock-probe there
    (and failed on a read-only copy: "Read-only file system")."""
    from filelock import FileLock

    committed(root, *(path.name for path in REFERENCE.glob("table1__*")))
    locks = root / "results" / "tiny" / ".locks"
    locks.mkdir()
    (locks / f"{RUN}.lock").touch()
    before = tree(root)
    assert cli.main(["grid", "table1", "--profile", "tiny", "--dry-run"]) == 0
    assert changes(before, tree(root)) == []
    with FileLock(locks / f"{RUN}.lock", timeout=0):  # another writer holds the run now
        err = cli_refused(root, ["grid", "table1", "--profile", "tiny", "--dry-run"], capsys)
    assert f"would be refused (1 of 10 runs): error: results/tiny/{RUN}: run: run tiny/{RUN} is being written by" in err


# --- stray run directories -----------------------------------------------------------------------------------


def test_stray_seed_directories_are_ignored_with_a_note_never_a_row(root: Path, capsys) -> None:
    """`<run>__seed²` (a copy of a run) made every report a traceback; an empty `<run>__seed99999999999` added a
    0-seed row to table1.md. Both are named on stderr and the artefacts are byte for byte those without them."""
    committed(root, *(path.name for path in REFERENCE.iterdir() if path.is_dir()))
    argv = ["report", "table1", "claims", "--profile", "tiny"]
    assert cli.main(argv) == 0
    built = {name: (root / "paper_figures" / "tiny" / name).read_bytes() for name in ("table1.md", "claims.md")}
    strays = [root / "results" / "tiny" / f"{RUN}__seed{tail}" for tail in ("²", "99999999999", "007")]
    for stray in strays:
        shutil.copytree(root / "results" / "tiny" / RUN, stray)
    (strays[1] / "status.json").unlink()  # (its other files: a directory no run wrote)
    capsys.readouterr()
    assert cli.main(argv) == 0
    err = capsys.readouterr().err
    assert {name: (root / "paper_figures" / "tiny" / name).read_bytes() for name in built} == built
    for stray, why in zip(
        strays,
        [
            "'²' is not a seed (expected a whole number >= 1 in plain digits)",
            "no status.json in it: no run wrote it",
            "'007' is not a seed (expected a whole number >= 1 in plain digits)",
        ],
        strict=True,
    ):
        assert err.count(f"note: results/tiny/{stray.name}: not a run of grid table1 ({why}); ignored\n") == 1


# --- a broken record behind its twin ----------------------------------------------------------------------------

CUT = "table1__I32nothink-I1.7nothink__gropd"  # the committed run its twins in lambda, gamma and scale copied


def test_a_cut_short_record_is_named_even_where_its_twin_counts_for_its_seed(root: Path) -> None:
    """table1.md, claims.md and the page counted n = 3 (the twin's seed 0) and never named the broken record."""
    committed(root, *(path.name for path in REFERENCE.iterdir() if path.is_dir()))
    out = root / "paper_figures" / "tiny"
    names = ("table1.md", "claims.md", "index.html")
    assert cli.main(["report", "table1", "claims", "--profile", "tiny"]) == 0
    before = {name: (out / name).read_text().splitlines() for name in names}
    metrics = root / "results" / "tiny" / CUT / "metrics.jsonl"
    metrics.write_text("".join(metrics.read_text().splitlines(keepends=True)[:50]))  # steps 1..50 of 100
    assert cli.main(["report", "table1", "claims", "--profile", "tiny"]) == 0
    after = {name: (out / name).read_text().splitlines() for name in names}

    added = [line for line in after["table1.md"] if line not in before["table1.md"]]
    assert [line for line in before["table1.md"] if line not in after["table1.md"]] == []  # every row as it was
    prefix = f"- `{CUT}`: broken record: metrics.jsonl ends at step 50, but status.json at step 100 (cut short?); "
    assert len(added) == 1 and added[0].startswith(prefix + "seed 0 is counted from its twin `"), added
    twin = added[0].removeprefix(prefix + "seed 0 is counted from its twin `").removesuffix("`")
    config = {
        name: yaml.safe_load((root / "results" / "tiny" / name / "config.yaml").read_text()) for name in (CUT, twin)
    }
    for run in config.values():
        del run["run_id"], run["grid"]
    assert twin != CUT and config[twin] == config[CUT]
    assert json.loads((root / "results" / "tiny" / twin / "status.json").read_text())["status"] == "finished"
    assert any(line.startswith(prefix) for line in after["claims.md"])
    assert any(
        f"<code>{CUT}</code>: broken record: metrics.jsonl ends at step 50" in line for line in after["index.html"]
    )


# --- a grid or a task named twice --------------------------------------------------------------------------------

TWICE = [
    (
        ["grid", "table1", "table1", "--profile", "tiny"],
        "grid: 'table1' named more than once (expected each grid once)",
    ),
    (
        ["grid", "table1", "lambda", "table1", "--profile", "tiny", "--dry-run"],
        "grid: 'table1' named more than once (expected each grid once)",
    ),
    (
        ["runs", "--grid", "lambda", "--grid", "lambda", "--profile", "tiny"],
        "--grid: 'lambda' named more than once (expected each grid once)",
    ),
    (
        ["run", RUN, "--profile", "tiny", "train.prompts.source.tasks=[add, sub, add]"],
        "train.prompts.source: source.tasks: each task once (named more than once: add) (got ['add', 'sub', 'add'])",
    ),
]


@pytest.mark.parametrize(("argv", "message"), TWICE, ids=[" ".join(a[:3]) for a, _ in TWICE])
def test_a_grid_or_task_named_twice_is_refused(root: Path, argv: list[str], message: str, capsys) -> None:
    """`grid mini mini` planned every run twice and started two writers (exit 1 though the runs finished); a task
    named twice doubled it in the training pool, where a suite named twice was refused."""
    assert cli_refused(root, argv, capsys) == f"error: command line: {message}\n"


# --- a key read nowhere -------------------------------------------------------------------------------------------

SPLIT = (
    "not supported: the key is read nowhere (only 'train' is accepted; a hub source's split is "
    "train.prompts.source.split)"
)


def test_train_prompts_split_other_than_train_is_refused(root: Path, capsys) -> None:
    """It was accepted, changed nothing but the config hash, and so marked every run "changed"."""
    committed(root, RUN)
    err = cli_refused(root, ["run", RUN, "--profile", "tiny", "train.prompts.split=test"], capsys)
    assert err == f"error: command line: train.prompts.split: {SPLIT} (got 'test')\n"
    assert cli.main(["status", "--profile", "tiny", "train.prompts.split=test"]) == 2
    path = root / "experiments" / "runs" / "tiny" / f"{RUN}.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(
        f"run_id: {RUN}\npairing: I4nothink-I1.7nothink\nmethod: gropd\ntrain: {{prompts: {{split: test}}}}\n"
    )
    err = cli_refused(root, ["run", RUN, "--profile", "tiny"], capsys)
    assert err == f"error: experiments/runs/tiny/{RUN}.yaml: train.prompts.split: {SPLIT} (got 'test')\n"
    path.unlink()
    assert status_table(capsys)[RUN].split()[1] == "finished"  # its default, "train", keeps the recorded hash


# --- entries a profile cannot run -------------------------------------------------------------------------------


def test_status_says_which_runs_are_not_in_the_paper_profile(root: Path, capsys) -> None:
    """The fullkl baselines need a transformers teacher, the paper profile's is vLLM's: "broken" said their files
    were at fault. One that ran there anyway (a status.json) is still broken."""
    grid = yaml.safe_load((root / "experiments" / "grids" / "baselines.yaml").read_text())
    fullkl = {f"baselines__{pairing}__fullkl" for pairing in grid["matrix"]["pairing"]}
    for world5 in ("long_pilot__B4-B1.7", "long_cross__I4think-B1.7"):  # world 5's grids
        fullkl |= {f"{world5}__fullkl{seed}" for seed in ("", "__seed1", "__seed2")}
    capsys.readouterr()
    assert cli.main(["status", "--profile", "paper"]) == 0
    out = capsys.readouterr().out.splitlines()
    rows = {line.split()[0]: line for line in out[2:-1]}
    assert {run_id for run_id, line in rows.items() if "not in this profile" in line} == fullkl
    assert all(
        f"{run_id}{' ' * 4}" in rows[run_id] and "method fullkl (expected hf" in rows[run_id] for run_id in fullkl
    )
    assert out[-1] == f"{len(rows)} runs: {len(fullkl)} not in this profile, {len(rows) - len(fullkl)} new"
    ran = sorted(fullkl)[0]
    (root / "results" / "paper" / ran).mkdir(parents=True)
    (root / "results" / "paper" / ran / "status.json").write_text("{}")
    assert cli.main(["status", "--profile", "paper"]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith(ran + " "))
    assert line.split()[1] == "broken"


# --- paper_figures/ is the project's -------------------------------------------------------------------------------


def test_only_the_projects_own_paper_figures_is_refused_as_results(root: Path, tmp_path_factory, capsys) -> None:
    """A scratch folder `<anywhere>/paper_figures/res` was refused as "in paper_figures/"."""
    elsewhere = tmp_path_factory.mktemp("scratch") / "paper_figures" / "res"
    (root / "linked").symlink_to(root / "paper_figures")
    for results in ("paper_figures/res", "paper_figures", "linked/res"):
        err = cli_refused(root, ["--results", results, "run", RUN, "--profile", "tiny"], capsys)
        assert err == (
            f"error: command line: --results: {results} is in paper_figures/, where the published artefacts live "
            "(expected a results directory (default: results/))\n"
        )
    nosuch = "table1__nosuch__gropd"  # refused by its run id, after --results passed
    err = cli_refused(root, ["--results", str(elsewhere), "run", nosuch, "--profile", "tiny"], capsys)
    assert err.startswith(f"error: experiments/runs/tiny/{nosuch}.yaml: run_id: no run")


# --- evaluating a run that never ran ----------------------------------------------------------------------------


def test_evaluate_recorded_of_a_run_that_never_ran_says_so(root: Path, capsys) -> None:
    """It said to delete results/tiny/<run>, a directory that did not exist."""
    err = cli_refused(root, ["evaluate", RUN, "--profile", "tiny", "--recorded"], capsys)
    assert err == (
        f"error: command line: --recorded: run {RUN} has not run under results/tiny/ (no results/tiny/{RUN}/, so no "
        f"recorded config) (expected a run that trained: `python -m gropd.cli run {RUN} --profile tiny` trains and "
        "evaluates it)\n"
    )
    (root / "results" / "tiny" / RUN).mkdir()  # a directory without its config.yaml: that one is named
    err = cli_refused(root, ["evaluate", RUN, "--profile", "tiny", "--recorded"], capsys)
    assert err.startswith(f"error: results/tiny/{RUN}/config.yaml: missing; delete results/tiny/{RUN} and run it again")


# --- --help ---------------------------------------------------------------------------------------------------


def help_text(command: str, capsys) -> str:
    capsys.readouterr()
    with pytest.raises(SystemExit) as done:
        cli.main([command, "--help"])
    assert done.value.code == 0
    return " ".join(capsys.readouterr().out.split())  # argparse's wrapping undone


def test_every_subcommands_help_names_its_overrides_profiles_grids_and_artefacts(root: Path, capsys) -> None:
    """The help omitted the key.path=value overrides, the report names and the rehearsal profile."""
    from gropd.report import ARTEFACTS

    profiles = sorted(path.stem for path in (root / "experiments" / "profiles").glob("*.yaml"))
    grids = sorted(path.stem for path in (root / "experiments" / "grids").glob("*.yaml"))
    assert "rehearsal" in profiles
    for command in ("runs", "grid", "run", "evaluate", "status", "report"):
        text = help_text(command, capsys)
        assert f"one of {', '.join(profiles)}" in text, command
        if command != "report":
            assert "key.path=value ... after the other arguments: overrides of the resolved run config" in text
    assert f"grid names: {', '.join(grids)}" in help_text("grid", capsys)
    assert f"a grid ({', '.join(grids)}); repeat for more" in help_text("runs", capsys)
    assert f"artefacts: {', '.join(ARTEFACTS)}" in help_text("report", capsys)
    assert set(ARTEFACTS) == {builder.__name__ for builder in ARTEFACTS.values()}  # each name its builder's


# --- a section a run file emptied ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("section", "override", "key"),
    [("train", "train.steps=0", "train.prompts_per_batch"), ("gropd", "gropd.lam=0.3", "gropd.gamma")],
)
def test_a_section_a_run_file_set_to_null_is_blamed_on_the_file(root: Path, section, override, key, capsys) -> None:
    """`train: null` in the run file and `train.steps=0` on the command line blamed the command line for every
    train key the null dropped."""
    path = root / "experiments" / "runs" / "tiny" / f"{RUN}.yaml"
    path.parent.mkdir(parents=True)
    path.write_text(f"run_id: {RUN}\npairing: I4nothink-I1.7nothink\nmethod: gropd\n{section}: null\n")
    err = cli_refused(root, ["run", RUN, "--profile", "tiny", override], capsys)
    assert err == f"error: experiments/runs/tiny/{RUN}.yaml: {key}: missing (expected a value)\n"
    path.unlink()  # without the null, the command line's own value is the command line's
    err = cli_refused(root, ["run", RUN, "--profile", "tiny", override.replace("=0.3", "=-1")], capsys)
    assert err.startswith(f"error: command line: {override.split('=')[0]}: ")

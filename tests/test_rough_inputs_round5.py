"""Rough inputs of the fifth front-door round (issue 65), each replayed on a scratch project and answered with one line
and exit 2 before anything is written, or with the right reading, where each was a late traceback, a misleading line or
a silent acceptance on 4757a4e."""

from __future__ import annotations

import errno
import json
import shutil
import socket
from pathlib import Path

import pytest
import yaml
from test_front_door import RUN, clone
from test_results_integrity import refused
from tiny_runs import REPO, native_profile

from gropd import cli
from gropd.config import data_hash
from gropd.record.run_dir import RunDir
from gropd.runs.session import is_alive


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh clone's layout in tmp_path/repo as the current directory (tmp_path: where a run escaping it lands)."""
    (tmp_path / "repo").mkdir()
    root = clone(tmp_path / "repo", venv=False)
    native_profile(root / "experiments")
    monkeypatch.chdir(root)
    return root


SAMPLING = [
    ("sampling.max_new_tokens=600", "sampling.max_new_tokens: 600 tokens after a prompt of at least one: past model"),
    ("eval.sampling.nothink.max_new_tokens=512", "eval.sampling.nothink.max_new_tokens: 512 tokens after a prompt"),
]


@pytest.mark.parametrize(("override", "message"), SAMPLING, ids=[o for o, _ in SAMPLING])
def test_a_response_cap_past_the_models_positions_is_refused_before_anything(project, capsys, override, message):
    """sampling.max_new_tokens=600 trained a step, then a 76-line traceback: position 512 is past the tiny models'
    max_position_embeddings, which their config.json says before the run."""
    err = refused(project, ["run", RUN, "--profile", "tiny", override], capsys)
    assert message in err and "I1.7's 512 positions (max_position_embeddings in its config.json)" in err
    assert "(expected at most 511 (less the prompt's length))" in err


PLACES = [
    ("/", "'/' is the filesystem's root"),
    ("~/runs", "'~/runs' starts with a '~' no shell expanded: it would make a folder named '~'"),
    ("experiments", "'experiments' resolves to"),
    ("experiments/runs/mine", "'experiments/runs/mine' resolves to"),
]


@pytest.mark.parametrize(("results", "message"), PLACES, ids=[r for r, _ in PLACES])
def test_results_at_the_root_under_a_literal_tilde_or_in_experiments_is_refused(project, capsys, results, message):
    """`--results /` wrote /tiny/ (while `.` was refused), `'~/x'` made a folder named `~`, `--results experiments`
    put checkpoints among the YAML files."""
    for argv in (["run", RUN, "--profile", "tiny"], ["grid", "table1", "--profile", "tiny"]):
        err = refused(project, ["--results", results, *argv], capsys)
        assert f"error: command line: --results: {message}" in err
        assert "experiments" not in results or "inside experiments/: its YAML files are the project's settings" in err
    assert not (project / "~").exists()


def test_an_os_error_on_a_results_path_is_one_line_and_exit_2(project, capsys) -> None:
    """A name past the filesystem's limit, a file where a folder goes: rc 1 ("File name too long", "Not a
    directory"), as a full disk mid-run is, and after the run's file was written; they are paths the user gave: exit
    2, nothing written."""
    (project / "plain-file").write_text("")
    (project / "holder").mkdir()
    (project / "holder" / "tiny").write_text("a file where the profile's folder goes")
    cases = {
        "n" * 300: "File name too long",
        "plain-file/results": "plain-file is a file, on the path of plain-file/results/tiny",
        "holder": "holder/tiny is a file, on the path of holder/tiny",
    }
    for results, strerror in cases.items():
        err = refused(project, ["--results", results, "run", RUN, "--profile", "tiny"], capsys)
        assert err.startswith("error: ") and len(err.strip().splitlines()) == 1 and strerror in err, err


def test_absurd_keys_and_counts_and_yaml_merge_keys_are_one_line(project, capsys) -> None:
    """A 2,000-segment key was a RecursionError; train.steps=10**23 was accepted; a YAML merge key (`<<: *base`)
    in a run file gave an unclear error."""
    deep = ".".join(["train"] * 2000) + "=1"
    err = refused(project, ["run", RUN, "--profile", "tiny", deep], capsys)
    assert "a key 2,000 levels deep (expected at most 16 levels)" in err and len(err) < 400
    for steps in ("1" + "0" * 23, "1e23"):
        err = refused(project, ["run", RUN, "--profile", "tiny", f"train.steps={steps}"], capsys)
        assert "command line: train.steps: " in err
    assert "Input should be less than or equal to 1000000" in refused(
        project, ["run", RUN, "--profile", "tiny", "train.steps=1000001"], capsys
    )
    run_file = project / "experiments" / "runs" / "tiny" / f"{RUN}.yaml"
    run_file.parent.mkdir(parents=True)
    run_file.write_text(f"run_id: {RUN}\nbase: &base {{lam: 0.5}}\ngropd:\n  <<: *base\n  gamma: 1.0\n")
    err = refused(project, ["run", RUN, "--profile", "tiny"], capsys)
    assert "a YAML merge key (<<) at line 4, column 3: not read here; write the keys it would merge out" in err


def test_a_running_status_updated_in_the_future_is_stale(project, capsys) -> None:
    """`updated: 2099-...` from another host showed "ETA 0s" forever and reports listed the run as running."""
    status = {"pid": 4242, "host": "elsewhere-" + socket.gethostname(), "status": "running"}
    assert not is_alive(status | {"updated": "2099-01-01T00:00:00+00:00"})
    run_dir = RunDir(project / "results" / "tiny" / RUN)
    run_dir.root.mkdir(parents=True)
    config = yaml.safe_load((REPO / "results" / "reference" / "tiny" / RUN / "config.yaml").read_text())
    run_dir.config_path.write_text(yaml.safe_dump(config))
    fields = {"run_id": RUN, "profile": "tiny", "kind": "train", "step": 0, "config_hash": data_hash(config)}
    run_dir.status_path.write_text(json.dumps(status | fields | {"updated": "2099-01-01T00:00:00+00:00"}))
    capsys.readouterr()
    assert cli.main(["status", "--profile", "tiny"]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith(RUN + " "))
    assert line.split()[1] != "running" and "ETA" not in line, line


def test_a_flipped_byte_in_a_tiny_world_model_is_refused_before_anything(project, capsys) -> None:
    """world.json had no file hashes: one flipped byte in a committed model.safetensors went unnoticed by a new run
    (only a resumed one compared its status.json's digests)."""
    link = project / "results" / "tiny" / "world"
    committed = link.resolve()
    link.unlink()
    shutil.copytree(committed, link)
    model = next(link.glob("*/models/I1.7/model.safetensors"))
    data = bytearray(model.read_bytes())
    data[len(data) // 2] ^= 1
    model.write_bytes(bytes(data))
    err = refused(project, ["run", RUN, "--profile", "tiny"], capsys)
    assert "models/I1.7/model.safetensors: sha256: " in err
    assert "the tiny world's files changed since it was built" in err


def test_the_committed_worlds_file_hashes_are_the_bytes_every_committed_run_recorded() -> None:
    """world.json's `files` (computed once for the committed world) against the 4,056 digests the committed runs'
    status.json recorded of the files they loaded, each run its own reading."""
    info = json.loads(next((REPO / "results" / "tiny" / "world").glob("*/world.json")).read_text())
    compared = 0
    for path in REPO.glob("results/*/tiny/*/status.json"):
        status = json.loads(path.read_text())
        for role, digests in (status.get("digests") or {}).items():
            label = status["checkpoints"][role].split()[1]  # "tiny I4 1e79231d403e"
            for name, digest in (digests or {}).items():
                assert info["files"][name if name.startswith("tokenizer/") else f"models/{label}/{name}"] == digest
                compared += 1
    assert compared == 4056 and len(info["files"]) == 21  # 6 models x 3 files, the tokenizer's 3


def test_a_file_too_large_mid_write_names_where_it_wrote(project, capsys, monkeypatch) -> None:
    """EFBIG from a write to an open file carries no path: the one line names the results directory written under,
    and the exit is 1 (what befell a write, as a full disk: the run resumes), not a traceback."""

    def too_large(args) -> int:
        raise OSError(errno.EFBIG, "File too large")

    monkeypatch.chdir(project)
    monkeypatch.setattr(cli, "cmd_status", too_large)
    assert cli.main(["--results", "elsewhere", "status", "--profile", "tiny"]) == 1
    err = capsys.readouterr().err
    assert err == "error: a write under elsewhere/: File too large\n"

"""A command whose console reader is gone (`| head`) goes on and leaves its runs whole (gropd/console.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tiny_runs import REPO, project

from gropd.console import ReaderGoneProof


def test_a_write_to_a_pipe_without_reader_goes_to_devnull_from_then_on() -> None:
    read_end, write_end = os.pipe()
    stream = ReaderGoneProof(open(write_end, "w", buffering=1))
    stream.write("seen\n")
    assert os.read(read_end, 100) == b"seen\n"
    os.close(read_end)
    stream.write("after the reader went\n")  # raised BrokenPipeError before
    stream.flush()
    assert os.readlink(f"/proc/self/fd/{write_end}") == "/dev/null"
    stream.write("x" * 1_000_000)  # more than a pipe holds: nothing blocks
    stream.close()


@pytest.mark.slow
def test_a_run_whose_reader_closed_the_pipe_finishes(tmp_path: Path) -> None:
    """`gropd.cli run … 2>&1 | head -1`: before, the second line raised BrokenPipeError inside the run, which
    stopped with exit 1 and no word, its status.json left 'running'."""
    root = project(tmp_path)
    run_id = "table6__I4-nothink"
    command = [sys.executable, "-m", "gropd.cli", "run", run_id, "--profile", "tiny", "eval.questions=2"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    process = subprocess.Popen(command, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    assert process.stdout.readline()  # `head -1`: one line, then the reader is gone
    process.stdout.close()
    assert process.wait(timeout=300) == 0
    status = json.loads((root / "results" / "tiny" / run_id / "status.json").read_text())
    assert status["status"] == "finished"

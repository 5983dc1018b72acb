""".ci/run's real-vLLM lane: a venv that could not be made skips the rehearsal and says so; nothing else does.

.ci/run is copied beside fakes of what it calls (reproduce.sh, benchmarks/vllm_cpu_check.sh) that log their
arguments and exit as told, and its exit status and what it called are read."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def ci_run(tmp_path: Path, make_exit: int, rehearse_exit: int = 0, tests_exit: int = 0, stamped: bool = False):
    """(exit status, stderr, calls) of .ci/run where vllm_cpu_check.sh's `--make-venv` exits `make_exit`,
    `--rehearse` `rehearse_exit`, its tests (no argument) `tests_exit`, and the venv's stamp exists when `stamped`."""
    checkout, venv, log = tmp_path / "checkout", tmp_path / "venv", tmp_path / "calls"
    (checkout / ".ci").mkdir(parents=True)
    (checkout / "benchmarks").mkdir()
    shutil.copy(REPO / ".ci/run", checkout / ".ci/run")
    venv.mkdir()
    if stamped:
        (venv / ".gropd-requirements.sha256").write_text("0" * 64 + "\n")
    fakes = {
        "reproduce.sh": 'echo "reproduce.sh $*" >> {log}',
        "benchmarks/vllm_cpu_check.sh": 'echo "vllm_cpu_check $*" >> {log}\n'
        f'[[ "$1" == --make-venv ]] && exit {make_exit}\n[[ "$1" == --rehearse ]] && exit {rehearse_exit}\n'
        f"[[ $# == 0 ]] && exit {tests_exit}\nexit 99",
    }
    for name, body in fakes.items():
        (checkout / name).write_text("#!/usr/bin/env bash\n" + body.format(log=log) + "\n")
        (checkout / name).chmod(0o755)
    env = {**os.environ, "VLLM_CPU_VENV": str(venv)}
    done = subprocess.run(["bash", str(checkout / ".ci/run")], env=env, capture_output=True, text=True, timeout=60)
    return done.returncode, done.stderr, log.read_text().splitlines()


SUITE = ["reproduce.sh test", "reproduce.sh rehearse", "vllm_cpu_check --make-venv"]


def test_a_made_venv_runs_the_rehearsal_and_the_tests_and_a_failure_of_either_fails_ci(tmp_path: Path) -> None:
    code, err, calls = ci_run(tmp_path, make_exit=0)
    assert (code, calls) == (0, [*SUITE, "vllm_cpu_check --rehearse", "vllm_cpu_check "]), err
    code, err, calls = ci_run(tmp_path / "stage", make_exit=0, rehearse_exit=1)
    assert (code, calls) == (1, [*SUITE, "vllm_cpu_check --rehearse"]) and "SKIPPED" not in err
    code, err, calls = ci_run(tmp_path / "test", make_exit=0, tests_exit=1)
    assert (code, calls) == (1, [*SUITE, "vllm_cpu_check --rehearse", "vllm_cpu_check "]) and "SKIPPED" not in err


@pytest.mark.parametrize("make_exit", [4, 124])
def test_a_venv_that_could_not_be_made_skips_the_rehearsal_saying_so(tmp_path: Path, make_exit: int) -> None:
    """pip failed (exit 4), or making the venv outran its limit (timeout's 124) before the stamp was written."""
    code, err, calls = ci_run(tmp_path, make_exit=make_exit)
    assert (code, calls) == (0, SUITE)
    assert f"ci: SKIPPED the real-vLLM rehearsal and tests: their venv could not be made (exit {make_exit}" in err


@pytest.mark.parametrize(("make_exit", "stamped", "code"), [(3, True, 3), (124, True, 3), (2, False, 2)])
def test_a_made_venv_whose_checks_fail_fails_ci(tmp_path: Path, make_exit: int, stamped: bool, code: int) -> None:
    """vLLM not importing in a made venv (exit 3), the limit reached after the stamp (its checks hung), a refusal."""
    assert ci_run(tmp_path, make_exit=make_exit, stamped=stamped)[::2] == (code, SUITE)

"""The processes of the paper path load no report: matplotlib and gropd.report come only with the commands that
build reports (`report`, hence ./reproduce.sh's table and figure targets and `claims`).

A cluster's .venv has matplotlib (requirements.txt), but a trainer rank, an evaluation shard or a grading worker
has no use for it, and an environment built without it (benchmarks/vllm_cpu_check.sh's before issue 68) failed at
`import gropd.cli`. Each entry module is imported in a fresh interpreter, in the order a process meets them, and
the report modules each one brought in are named; a lazy import inside a function is found from the source."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from test_layers import PACKAGES, REPO, imports, module_name

ENTRY_MODULES = {  # the module, and which process of the paper path starts on it
    "gropd.cli": "the command line: every trainer rank (`run`) and evaluation shard (`evaluate`) under the launcher",
    "gropd.runs.pipeline": "gropd.cli run and evaluate: execute() and evaluate()",
    "gropd.train.loop": "a training run (train_run)",
    "gropd.train.scoring": "a scoring run (score_run)",
    "gropd.runs.evaluation": "an evaluation shard (evaluate_run)",
    "eval.runner": "an evaluation shard's suites",
    "eval.grading": "the grading pool of an evaluation",
    "eval.grading_worker": "a grading worker (python -P -m eval.grading_worker FD)",
    "gropd.model.teacher.local_server": "the teacher server where vLLM is not installed",
    "gropd.model.teacher.server": "a trainer's client of the teacher server",
    "gropd.runs.preflight_env": "the job's preflight (./reproduce.sh check)",
    "gropd.model.hardware": "the profile's choice (python -m gropd.model.hardware)",
}

PROBE = """
import importlib, json, sys
def report_modules():
    return {m for m in sys.modules if m.split(".")[0] == "matplotlib" or m.split(".")[:2] == ["gropd", "report"]}
brought = {}
for module in sys.argv[1:]:
    before = report_modules()
    importlib.import_module(module)
    brought[module] = sorted(report_modules() - before)
print(json.dumps(brought))
"""


def report_modules_brought(modules: list[str]) -> dict[str, list[str]]:
    """{module: the matplotlib and gropd.report modules its import added}, imported in turn in a fresh interpreter."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *modules], cwd=REPO, capture_output=True, text=True, env=env, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def test_no_process_of_the_paper_path_imports_matplotlib_or_the_report() -> None:
    brought = report_modules_brought(list(ENTRY_MODULES))
    loaded = {f"{module} ({ENTRY_MODULES[module]})": names[:5] for module, names in brought.items() if names}
    assert not loaded, f"these imports load the report package or matplotlib: {loaded}"


def test_the_probe_sees_the_report_package() -> None:
    """The check can fail: importing the report package itself is seen, matplotlib with it."""
    brought = report_modules_brought(["gropd.artefacts", "gropd.report"])
    assert brought["gropd.artefacts"] == []
    assert {"gropd.report", "gropd.report.figures", "matplotlib"} <= set(brought["gropd.report"])


def test_only_the_report_package_imports_matplotlib() -> None:
    """Read from the source (imports inside functions too): a lazy `import matplotlib` in a training or evaluation
    module would load it mid-run, where the import check above cannot see it."""
    importers = [
        module_name(path)
        for package in PACKAGES
        for path in sorted((REPO / package).rglob("*.py"))
        if any(name.split(".")[0] == "matplotlib" for name in imports(path))
    ]
    assert importers, "no module imports matplotlib: the report's figures moved, and this test with them"
    outside = [name for name in importers if name.split(".")[:2] != ["gropd", "report"]]
    assert not outside, f"modules outside gropd.report that import matplotlib: {outside}"

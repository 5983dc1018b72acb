"""The job's environment, checked in seconds before anything loads: the first step of
experiments/launch/slurm_run.sbatch and teacher_server.sh (`./reproduce.sh check`, which first makes sure .venv
holds the GPU environment of `./reproduce.sh gpu-env`), and a command to run by hand on a compute node.

    GPUs            torch sees exactly --processes CUDA devices, one per process the launcher starts (with
                    --serving: at least that many, the server's tensor-parallel size)
    GPU memory      nothing else holds more than a tenth of any of them (vLLM refuses to start below its fraction)
    torch build     requirements-gpu.txt's torch, built for a CUDA the NVIDIA driver runs (hardware.MIN_DRIVER)
    CPUs            this step may run on the CPUs the job asked per task (SLURM_CPUS_PER_TASK) and on at least
                    CPUS_PER_PROCESS a process: a trainer's Python thread also drives its two vLLM engines'
                    schedulers and detokenisers, beside compilation and the math-verify workers
    vLLM            imports, at requirements-gpu.txt's version
    pins            every requirements.txt pin installed as pinned, or moved by requirements-gpu.txt on purpose (a
                    package a dependency moved without a file naming it fails: the CPU suite never ran it)
    snapshots       every model and dataset pinned in experiments/lock.yaml is in the Hub cache, which the job
                    reads offline (HF_HUB_OFFLINE=1 unless it is 0: then a missing one is downloaded, a note)
    teacher server  the job's run (--run; without it, each Table 1 run) whose teacher is served finds its server
                    alive (GET /health) listing its pinned `<repo>@<revision>` (/v1/models) at TEACHER_URL or its
                    address file, within CHECK_WAIT_S of the wait its run waits anyway (gropd/model/teacher/
                    server.py: wait_for_server, backoff from 1 s): liveness, never a generation, which a busy server
                    answers late. Another model fails; no answer yet is a note (its runs wait GROPD_TEACHER_WAIT_S);
                    a run whose teacher is not served looks at no server
    host memory     the job's cgroup memory limit (cgroup v2 memory.max, v1 memory.limit_in_bytes, the least of
                    the job's cgroup and its parents) holds what the plan needs on this node (gropd/runs/job_plan.py:
                    the --mem of experiments/launch/*.sh*); below it, the job would be killed at its first checkpoint
    disk            the results directory's filesystem holds one run's checkpoints: float32 masters and AdamW
                    state (12 bytes a parameter) for keep_checkpoints + 1 checkpoints, and the bf16 final model
    run locks       flock(2) works in results/<profile>/.locks (without it a run's lock is a soft lock file that a
                    killed job leaves behind for good)
    nodes           (a multi-node job: GROPD_RENDEZVOUS set) every node meets the others (gloo), and an flock one
                    node holds there is held for all (gropd/runs/node_probe.py)

Each check prints one line, `ok`, `note` or `FAILED` (saying what to set); exit 2 when any failed.

    python -m gropd.runs.preflight_env [--processes N] [--serving LABEL | --run RUN_ID] [--results DIR]
                                       [--profile paper]
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import json
import os
import shutil
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gropd.config import ConfigError, load_manifests, resolve_run
from gropd.config.lock import read_lock
from gropd.config.manifests import Manifests
from gropd.config.schema import RunConfig
from gropd.model.hardware import MIN_DRIVER, nvidia_gpus, why_not_usable
from gropd.record.run_lock import LOCKS, flock_problem
from gropd.runs import cgroup

if TYPE_CHECKING:
    from gropd.model.teacher.server import TeacherAddress

EXPERIMENTS = Path("experiments")
CPU_REQUIREMENTS, GPU_REQUIREMENTS = Path("requirements.txt"), Path("requirements-gpu.txt")
CPUS_PER_PROCESS = 2
MODEL_FILES = ("config.json", "tokenizer.json", "tokenizer_config.json")  # a snapshot's files besides its weights
CHECKPOINT_BYTES, FINAL_BYTES = 12, 2  # a parameter's float32 master + AdamW moments; its bf16 final copy


@dataclass(frozen=True)
class Line:
    """One check's outcome: status ok | note | FAILED, what was checked, what was found (and what to set)."""

    status: str
    what: str
    text: str

    def __str__(self) -> str:
        return f"{self.status:<7} {self.what}: {self.text}"


def installed_version(name: str) -> str | None:
    """The installed version of `name` without its local label (torch's 2.13.0+cpu is 2.13.0), None if absent."""
    try:
        return importlib.metadata.version(name).split("+")[0]
    except importlib.metadata.PackageNotFoundError:
        return None


def gpu_pins(path: Path) -> dict[str, str]:
    """name -> version of the `name==version` lines of a requirements file."""
    pairs = [line.split("#")[0].strip().split("==") for line in path.read_text().splitlines()]
    return {pair[0].strip().lower(): pair[1].strip() for pair in pairs if len(pair) == 2}


def pins_line(cpu_pins: dict[str, str], gpu_pins: dict[str, str], installed: Callable[[str], str | None]) -> Line:
    """Every requirements.txt pin as installed: one that requirements-gpu.txt moves on purpose is listed, one that
    moved without a file naming it (a dependency's constraint: pip says nothing) fails. `installed(name)`: its
    version here, None when absent."""
    moved, silent = [], []
    for name, pinned in sorted(cpu_pins.items()):
        version = installed(name)
        if version is None or version == pinned:
            continue
        if gpu_pins.get(name) == version:
            moved.append(f"{name} {version} (the CPU suite runs {pinned})")
        else:
            silent.append(f"{name} {version}, not requirements.txt's {pinned}")
    if silent:
        fix = "pin it in requirements-gpu.txt on purpose (then the CPU suite's version is said), or resolve it"
        found = f"moved by a dependency, named by no requirements file: {'; '.join(silent)}"
        return Line("FAILED", "pins", f"{found}: {fix}")
    if moved:
        return Line("ok", "pins", f"as requirements.txt but for requirements-gpu.txt's {'; '.join(moved)}")
    return Line("ok", "pins", "every requirements.txt pin installed as pinned")


def installed_pins_line() -> Line:
    """pins_line of this .venv (`./reproduce.sh gpu-env` prints it once it has installed)."""
    return pins_line(gpu_pins(CPU_REQUIREMENTS), gpu_pins(GPU_REQUIREMENTS), installed_version)


MAX_TAKEN = 0.1  # of a card's memory that something else may hold when the job starts


def memory_line(free_total: list[tuple[int, int]]) -> Line:
    """Each visible GPU's memory is free when the job starts, (free, total) bytes a device: the run's engines take
    fixed fractions of a card (backend.*_gpu_fraction) beside the trainer, and vLLM refuses to start when less than
    its fraction is free, only once the student has loaded."""
    taken = [
        (index, total - free) for index, (free, total) in enumerate(free_total) if total - free > MAX_TAKEN * total
    ]
    if taken:
        held = ", ".join(f"GPU {index}: {used / 2**30:.1f} GiB" for index, used in taken)
        problem = f"already in use ({held}; nvidia-smi names the processes)"
        return Line("FAILED", "GPU memory", f"{problem}: end them, or ask Slurm for GPUs of your own (--exclusive)")
    return Line("ok", "GPU memory", f"{len(free_total)} GPU(s) free (at most {MAX_TAKEN:.0%} of each in use)")


def gpus_line(
    listed: list[tuple[str, str]],
    cuda_devices: int,
    torch_version: str,
    torch_cuda: str | None,
    processes: int,
    exact: bool = True,
) -> Line:
    """GPUs: nvidia-smi's list, what torch sees of it, and the processes the launch starts (`exact`), or the GPUs
    a server's tensor parallelism takes (at least)."""
    if not listed:
        return Line("FAILED", "GPUs", "nvidia-smi lists none here: run on a GPU node (sbatch --gpus-per-node=N)")
    if not cuda_devices:
        return Line(
            "FAILED",
            "GPUs",
            f"nvidia-smi lists {len(listed)} but torch sees none: "
            + why_not_usable(listed[0][1], torch_version, torch_cuda),
        )
    if cuda_devices < processes or (exact and cuda_devices != processes):
        return Line(
            "FAILED",
            "GPUs",
            f"torch sees {cuda_devices} CUDA device(s), the launch starts {processes} process(es), one per GPU: "
            f"submit with --gpus-per-node={processes} (or give --processes {cuda_devices}; CUDA_VISIBLE_DEVICES "
            "limits what torch sees)",
        )
    return Line("ok", "GPUs", f"{cuda_devices} x {listed[0][0]}, one per process")


def torch_line(
    torch_version: str, torch_cuda: str | None, driver: str | None, pinned: str, cuda_works: bool = False
) -> Line:
    """torch build: the pinned version, a CUDA build, a driver new enough for it. Where torch already runs CUDA
    (`cuda_works`) the driver's version decides nothing: NVIDIA's forward-compatibility package (cuda-compat) runs
    a newer CUDA on an older data-centre driver (535, 550, 570 with CUDA 13), the only way such a node runs vLLM."""
    install = "./reproduce.sh gpu-env (from any node)"
    if torch_version.split("+")[0] != pinned:
        return Line("FAILED", "torch build", f"torch {torch_version}, requirements-gpu.txt pins {pinned}: {install}")
    if torch_cuda is None:
        return Line("FAILED", "torch build", f"torch {torch_version} is a CPU-only build: {install}")
    need = MIN_DRIVER.get(int(torch_cuda.split(".")[0]))
    major = driver.split(".")[0] if driver else ""
    if cuda_works and need is not None and (not major.isdigit() or int(major) < need):
        note = f"driver {driver} below {need}, CUDA works (forward compatibility: cuda-compat)"
        return Line("ok", "torch build", f"torch {torch_version} (CUDA {torch_cuda}), {note}")
    if need is not None and (not major.isdigit() or int(major) < need):
        return Line(
            "FAILED",
            "torch build",
            f"torch {torch_version} (CUDA {torch_cuda}) needs an NVIDIA driver >= {need}, this node has "
            f"{driver or 'none'}: run on a node with a newer driver",
        )
    return Line("ok", "torch build", f"torch {torch_version} (CUDA {torch_cuda}), driver {driver}")


def cpus_line(usable: int, asked: int | None, processes: int) -> Line:
    """CPUs: what this step may run on against the job's ask and CPUS_PER_PROCESS a process."""
    need = max(asked or 0, CPUS_PER_PROCESS * processes)
    if usable >= need:
        return Line("ok", "CPUs", f"{usable} for {processes} process(es) (asked per task: {asked or 'not set'})")
    return Line(
        "FAILED",
        "CPUs",
        f"this step may run on {usable} CPU(s), it needs {need} ("
        + (f"the job asked {asked} per task; " if asked else "")
        + f"{CPUS_PER_PROCESS} a process): under srun give the step --cpus-per-task=$SLURM_CPUS_PER_TASK (Slurm "
        "22.05-23.02 srun does not pass the job's on; or export SRUN_CPUS_PER_TASK), and submit with "
        f"--cpus-per-task >= {CPUS_PER_PROCESS * processes}",
    )


def vllm_line(version: str | None, error: str | None, pinned: str) -> Line:
    """vLLM: installed at its pin, and importable."""
    install = "./reproduce.sh gpu-env (from any node)"
    if version is None:
        return Line(
            "FAILED", "vLLM", f"not installed in this environment (requirements-gpu.txt pins {pinned}): {install}"
        )
    if version != pinned:
        return Line("FAILED", "vLLM", f"{version} installed, requirements-gpu.txt pins {pinned}: {install}")
    if error:
        return Line("FAILED", "vLLM", f"{version} does not import ({error}): {install} again")
    return Line("ok", "vLLM", f"{version} imports")


def snapshot_lines(
    lock: dict[str, Any], cached: Callable[[str, str, str], str | None], offline: bool, only: str | None = None
) -> list[Line]:
    """Each pinned model (and, unless `only` names one repo, dataset) in the Hub cache: `cached(kind, repo, full)` is
    None when complete there, else what is missing."""
    wanted = [("model", repo, entry["full"]) for repo, entry in lock["models"].items() if only in (None, repo)]
    wanted += [] if only else [("dataset", repo, entry["full"]) for repo, entry in lock["datasets"].items()]
    lines = []
    for kind, repo, full in wanted:
        missing = cached(kind, repo, full)
        if missing is None:
            lines.append(Line("ok", "snapshot", f"{kind} {repo}@{full[:12]} in the Hub cache"))
            continue
        fetch = f"hf download {repo}{' --repo-type dataset' if kind == 'dataset' else ''} --revision {full}"
        if offline:
            lines.append(
                Line(
                    "FAILED",
                    "snapshot",
                    f"{kind} {repo}@{full} is not in the Hub cache ({missing}) and the job runs offline: {fetch} "
                    "where the Hub is reachable, with this HF_HOME (or HF_HUB_OFFLINE=0 where compute nodes may "
                    "download)",
                )
            )
        else:
            lines.append(
                Line(
                    "note",
                    "snapshot",
                    f"{kind} {repo}@{full[:12]} is not cached ({missing}); HF_HUB_OFFLINE=0: the job downloads it",
                )
            )
    return lines


def hub_cache_gap(kind: str, repo: str, full: str) -> str | None:
    """What of snapshot `repo@full` the local Hub cache lacks (None: nothing): a model's config.json, its tokenizer
    (MODEL_FILES: a cache filled with weights alone failed only once a rank loaded the tokenizer) and every weight
    file its index lists; a dataset's snapshot folder (its files are the ones `datasets` reads)."""
    from huggingface_hub import constants, try_to_load_from_cache

    if kind == "dataset":
        folder = Path(constants.HF_HUB_CACHE) / f"datasets--{repo.replace('/', '--')}" / "snapshots" / full
        return None if folder.is_dir() and any(folder.iterdir()) else f"no {folder}"
    files = list(MODEL_FILES)
    index = try_to_load_from_cache(repo, "model.safetensors.index.json", revision=full)
    if isinstance(index, str):
        files += sorted(set(json.loads(Path(index).read_text())["weight_map"].values()))
    else:
        files.append("model.safetensors")
    absent = [name for name in files if not isinstance(try_to_load_from_cache(repo, name, revision=full), str)]
    return f"missing {', '.join(absent[:3])}{' ...' if len(absent) > 3 else ''}" if absent else None


CHECK_WAIT_S = 30.0  # of the server wait a run waits anyway: a few looks (1, 2, 4, 8, 10, 5 s apart)


def teacher_line(label: str, expected: str, address: TeacherAddress, where: str, wait_s: float = CHECK_WAIT_S) -> Line:
    """A served teacher: its server, at `address` (TEACHER_URL or its address file, `where`), is alive and lists
    `expected` within `wait_s` (wait_for_server: GET /health, then /v1/models, with backoff). No generation is
    asked: a server scoring other runs' rows answers a completion only after them, and its runs wait anyway."""
    from gropd.model.teacher.server import TeacherServerAway, TeacherServerError, wait_for_server

    start = f"sbatch experiments/launch/teacher_server.sh {label}"
    if address.current() is None:
        return Line(
            "note",
            "teacher server",
            f"{label}: no address yet ({where}): is `{start}` queued? its runs wait up to GROPD_TEACHER_WAIT_S for it",
        )
    try:
        url, card = wait_for_server(address, expected, wait_s)
    except TeacherServerAway as err:
        last = str(err).split("(last: ", 1)[-1].rsplit("); is ", 1)[0]
        return Line(
            "note",
            "teacher server",
            f"{label}: {address.current()} ({where}) not alive within {wait_s:.0f} s ({last}); its runs wait up to "
            "GROPD_TEACHER_WAIT_S for it",
        )
    except TeacherServerError as err:  # it answered: with another model, or an HTTP error that is not transient
        return Line("FAILED", "teacher server", f"{label}: {err}")
    served = f"{url} is alive, serving {expected} (max_model_len {card.get('max_model_len')})"
    return Line("ok", "teacher server", f"{label}: {served}")


def disk_line(free: int, parameters: dict[str, int], keep: int, where: Path) -> Line:
    """Free bytes under the results directory against one run's checkpoints of its largest student."""
    if not parameters:
        return Line(
            "note",
            "disk",
            f"{free / 2**30:.0f} GiB free under {where}; the students' size is unknown (their config.json is not "
            "cached: see snapshots)",
        )
    label, count = max(parameters.items(), key=lambda item: item[1])
    need = count * (CHECKPOINT_BYTES * (keep + 1) + FINAL_BYTES)
    text = (
        f"{free / 2**30:.0f} GiB free under {where}; a run of {label} writes up to {need / 2**30:.0f} GiB ({keep} + 1 "
        "checkpoints of float32 masters and AdamW state, the bf16 final)"
    )
    return Line(
        "ok" if free >= need else "FAILED",
        "disk",
        text if free >= need else f"{text}: free space there, or --results DIR elsewhere",
    )


def job_runs(manifests: Manifests, profile: str, run: str | None, results: Path) -> list[RunConfig]:
    """The job's run (`run`, resolved as `gropd.cli run` resolves it), or without one the profile's Table 1 runs
    (pairings.yaml's per-profile settings included)."""
    from gropd.runs.pipeline import grid_entries
    from gropd.runs.plan import plan_run_id

    if run:
        return [plan_run_id(manifests, profile, run, [], results).config]
    return [
        resolve_run(None, profile, manifests, [], entry_values=entry.values)
        for entry in grid_entries(manifests, ["table1"])
    ]


def run_settings(manifests: Manifests, configs: list[RunConfig]) -> tuple[dict[str, str], dict[str, str], int]:
    """(served teacher label -> pinned served name, student label -> Hub repo, keep_checkpoints) of `configs`."""
    from gropd.model.checkpoints import checkpoint_ref

    served, students, keep = {}, {}, 0
    for config in configs:
        pairing, keep = manifests.pairings[config.pairing], config.train.keep_checkpoints
        students[pairing["student"]["model"]] = manifests.model(config.profile, pairing["student"]["model"])[
            "source"
        ].get("repo")
        if config.backend.teacher == "server":
            served[pairing["teacher"]["model"]] = checkpoint_ref(
                manifests, config.profile, pairing["teacher"]["model"]
            ).describe()
    return served, students, keep


def host_memory_line(limit: int | None, need_gib: int, how: str) -> Line:
    """The job's cgroup memory limit (bytes, None: none) against the `need_gib` its plan derives (`how`)."""
    if limit is None:
        return Line("note", "host memory", "no cgroup memory limit: nothing caps this job below the node's memory")
    have = f"the job's cgroup allows {limit / 2**30:.1f} GiB, its plan needs {need_gib} GiB ({how})"
    if limit < need_gib * 2**30:
        fix = f"submit with --mem={need_gib}G (the scripts ask it; an --mem on the command line or a site default wins)"
        return Line("FAILED", "host memory", f"{have}: {fix}")
    return Line("ok", "host memory", have)


def plan_memory(
    manifests: Manifests, configs: list[RunConfig], processes: int, serving: bool
) -> tuple[int, str] | None:
    """(GiB, derivation) the job's node needs (gropd/runs/job_plan.py), None outside the paper profile."""
    from gropd.runs.job_plan import HostMemory, server_memory, trainer_memory

    if serving:
        memory = server_memory(processes)
    elif configs and all(config.profile == "paper" for config in configs):
        memory = max((trainer_memory(config, manifests, processes) for config in configs), key=HostMemory.gib)
    else:
        return None
    return memory.gib(), memory.describe()


def environment_lines(processes: int, serving: bool, environ: Mapping[str, str]) -> list[Line]:
    """GPUs, torch build, CPUs and vLLM, as this process finds them."""
    import torch

    pins = gpu_pins(GPU_REQUIREMENTS)
    listed = nvidia_gpus()
    lines = [
        gpus_line(listed, torch.cuda.device_count(), torch.__version__, torch.version.cuda, processes, not serving),
        torch_line(
            torch.__version__,
            torch.version.cuda,
            listed[0][1] if listed else None,
            pins["torch"],
            cuda_works=torch.cuda.is_available(),
        ),
    ]
    if torch.cuda.is_available():
        lines.append(memory_line([torch.cuda.mem_get_info(index) for index in range(torch.cuda.device_count())]))
    asked = environ.get("SLURM_CPUS_PER_TASK", "")
    lines.append(cpus_line(len(os.sched_getaffinity(0)), int(asked) if asked.isdigit() else None, processes))
    try:
        version, error = importlib.metadata.version("vllm"), None
        importlib.import_module("vllm")
    except importlib.metadata.PackageNotFoundError:
        version, error = None, None
    except Exception as err:  # noqa: BLE001 - any import failure is the line's finding
        error = f"{type(err).__name__}: {err}"
    lines.append(vllm_line(version, error, pins["vllm"]))
    lines.append(installed_pins_line())
    return lines


def pinned_lines(args: argparse.Namespace, environ: Mapping[str, str], processes: int) -> list[Line]:
    """Snapshots, host memory, teacher servers and disk, from experiments/lock.yaml and the job's runs."""
    from gropd.model.teacher.server import teacher_address

    lock_path = EXPERIMENTS / "lock.yaml"
    if not lock_path.exists():
        return [
            Line(
                "FAILED",
                "snapshots",
                f"no {lock_path}: run ./reproduce.sh pin where the Hub is reachable, then fill the cache (LAYOUT.md)",
            )
        ]
    manifests, lock = load_manifests(EXPERIMENTS), read_lock(lock_path)
    configs = [] if args.serving else job_runs(manifests, args.profile, args.run, args.results)
    only = manifests.model(args.profile, args.serving)["source"].get("repo") if args.serving else None
    lines = snapshot_lines(lock, hub_cache_gap, environ.get("HF_HUB_OFFLINE", "1") not in ("", "0"), only)
    if args.profile == "paper" and (need := plan_memory(manifests, configs, processes, bool(args.serving))):
        lines.append(host_memory_line(cgroup.memory_limit(cgroup.read_proc_cgroup(), cgroup.ROOT), *need))
    if args.serving:
        return lines
    served, students, keep = run_settings(manifests, configs)
    for label, expected in served.items():
        address = teacher_address(environ.get("TEACHER_URL"), label, environ)
        where = "TEACHER_URL" if address.url else str(address.file)
        lines.append(teacher_line(label, expected, address, where))
    results = args.results if args.results.exists() else Path(".")
    lines.append(disk_line(shutil.disk_usage(results).free, student_parameters(students, lock), keep, args.results))
    lines.append(flock_line(args.results / args.profile / LOCKS))
    return lines


def flock_line(locks: Path) -> Line:
    """flock(2) works where the run locks live, results/<profile>/.locks (gropd/record/run_lock.py; made if absent)."""
    if problem := flock_problem(locks):
        fix = "put --results on a filesystem with flock (a local disk, NFSv4, Lustre mounted with -o flock, GPFS)"
        return Line("FAILED", "run locks", f"{locks}: {problem}: {fix}")
    return Line("ok", "run locks", f"flock(2) works in {locks}")


def student_parameters(students: dict[str, str], lock: dict[str, Any]) -> dict[str, int]:
    """Parameter counts of the students whose config.json is cached at their pinned revision."""
    from huggingface_hub import try_to_load_from_cache

    from gropd.model.fit import Architecture

    counts = {}
    for label, repo in students.items():
        full = (lock["models"].get(repo) or {}).get("full")
        path = try_to_load_from_cache(repo, "config.json", revision=full) if full else None
        if isinstance(path, str):
            counts[label] = Architecture.of(json.loads(Path(path).read_text())).parameters()
    return counts


def default_processes(environ: Mapping[str, str]) -> int:
    """SLURM_GPUS_ON_NODE, else the GPUs nvidia-smi lists, else Table 3's 8."""
    given = environ.get("SLURM_GPUS_ON_NODE", "")
    return int(given) if given.isdigit() else len(nvidia_gpus()) or 8


def nodes_line(environ: Mapping[str, str], locks: Path) -> Line | None:
    """The nodes met (gloo) and see one another's flocks under `locks` (gropd/runs/node_probe.py); None on one node."""
    from gropd.runs.node_probe import MEET_TIMEOUT_S, RENDEZVOUS, meet, ranks

    if (job := ranks(environ)) is None:
        return None
    where, rank, world = job
    problem, also_held = meet(where, rank, world, locks / ".coherence-probe")
    if problem:
        text = f"node {rank} of {world} could not meet the others at {where} ({RENDEZVOUS}) in {MEET_TIMEOUT_S} s: "
        return Line("FAILED", "nodes", text + f"{problem}: check that the nodes reach {where} (firewall, interface)")
    if also_held:
        text = f"{also_held} of {world - 1} other node(s) took an flock node 0 held in {locks}: flock is node-local"
        fix = "two nodes could both write one run: put --results where flock spans nodes (NFSv4, GPFS, Lustre -o flock)"
        return Line("FAILED", "nodes", f"{text}; {fix}")
    return Line("ok", "nodes", f"{world} nodes met at {where}; an flock in {locks} holds across them")


def main(argv: list[str] | None = None, environ: Mapping[str, str] = os.environ) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--processes", type=int, help="processes the job starts on this node, one per GPU")
    job = parser.add_mutually_exclusive_group()
    job.add_argument("--serving", metavar="LABEL", help="this node serves LABEL (teacher_server.sh)")
    job.add_argument("--run", metavar="RUN_ID", help="the job's run (slurm_run.sbatch): its teacher, its memory")
    parser.add_argument("--results", type=Path, default=Path("results"), help="where runs write (default results/)")
    parser.add_argument("--profile", default="paper")
    args = parser.parse_args(argv)
    processes = args.processes or default_processes(environ)
    lines = environment_lines(processes, bool(args.serving), environ)
    try:
        lines += pinned_lines(args, environ, processes)
    except ConfigError as err:  # a broken lock, a model it lacks, an unknown label: one line too
        lines.append(Line("FAILED", "experiments", str(err)))
    if not args.serving and (line := nodes_line(environ, args.results / args.profile / LOCKS)):
        lines.append(line)
    for line in lines:
        print(line, flush=True)
    failed = sum(line.status == "FAILED" for line in lines)
    print(f"check: {failed} failed of {len(lines)}" + (" (exit 2)" if failed else ": the job may start"), flush=True)
    return 2 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

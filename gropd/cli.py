"""Command line behind ./reproduce.sh: list, run and report the experiments.

    python -m gropd.cli runs    [--profile P] [--grid G ...] [--seeds N]
    python -m gropd.cli grid    G ... [--profile P] [--seeds N] [--jobs N] [--dry-run] [--force]
                                     [key.path=value ...]
    python -m gropd.cli run     RUN_ID [--profile P] [--force] [key.path=value ...]
    python -m gropd.cli evaluate RUN_ID [--profile P] [key.path=value ... | --recorded]   (a shard a process)
    python -m gropd.cli status  [--profile P ...] [key.path=value ...]
    python -m gropd.cli report  NAME ... [--profile P]
    python -m gropd.cli pin     [--profile paper]
    python -m gropd.cli world   [--profile tiny|tiny-long]  (build the tiny world now)

Every command takes --results DIR (default results/): where runs are written and read.
Bad input exits with status 2 and a message naming the file, key and expectation; every input of a
command (profile, grids, run files, overrides, results/, the lock) is checked before it writes anything.
"""

from __future__ import annotations

import argparse
import errno
import os
import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

from gropd.artefacts import ARTEFACT_NAMES
from gropd.config import ConfigError, Manifests, load_manifests
from gropd.config.grids import grid_names
from gropd.console import survive_a_closed_reader
from gropd.record.run_dir import RunDir
from gropd.runs.jobs import run_grid_jobs
from gropd.runs.layout_guard import require_results_location
from gropd.runs.lifecycle import run_state
from gropd.runs.pipeline import execute, find_run_file, grid_entries, materialise, planned_state
from gropd.runs.plan import REFUSED, check_overrides, plan_entry, plan_run_id, refusal
from gropd.runs.status import format_table, status_rows
from gropd.train.world import leave

EXPERIMENTS = Path("experiments")


def default_profile() -> str:
    """paper when CUDA is present, tiny where there is no GPU (and say so); a GPU node whose torch cannot
    see its GPUs stops (gropd/model/hardware.py). Asked in a process of its own, as reproduce.sh asks: torch
    loads there, so this one can still put a run's numerics mode in place before it loads torch (gropd/numerics.py)."""
    from gropd.model.hardware import GPUNotUsableError

    done = subprocess.run([sys.executable, "-m", "gropd.model.hardware"], stdout=subprocess.PIPE, text=True)
    if done.returncode:  # it said why on stderr
        raise GPUNotUsableError("no profile chosen: pass --profile")
    return done.stdout.strip()


def _seeds(count: int | None) -> list[int] | None:
    return list(range(count)) if count else None


def cmd_runs(args: argparse.Namespace) -> int:
    """List every run of the grids with its state, then write their run files (kept when edited): only
    once every run resolves, so a bad profile, seed count or run file writes nothing."""
    require_once(args.grid or [], "--grid")
    manifests = _manifests(args.profile)
    entries = grid_entries(manifests, args.grid or grid_names(EXPERIMENTS), _seeds(args.seeds), args.profile)
    plans = [plan_entry(manifests, args.profile, entry, args.overrides, args.results) for entry in entries]
    states = [run_state(plan.config, args.results, manifests)[1] for plan in plans]
    for (entry, path, written), state in zip(materialise(manifests, args.profile, entries), states, strict=True):
        print(f"{entry.run_id:<60} {state:<10} {path} ({written})")
    return 0


def cmd_grid(args: argparse.Namespace) -> int:
    """Resolve and check every run (and its results/) first; a dry run lists them and what would be refused
    (exit 2 if any); a real one writes the run files and runs them, or stops at the first refusal."""
    require_once(args.grids, "grid")
    manifests = _manifests(args.profile)
    entries = grid_entries(manifests, args.grids, _seeds(args.seeds), args.profile)
    if left_out := len(grid_entries(manifests, args.grids, _seeds(args.seeds))) - len(entries):
        print(f"{left_out} runs left out: they name models profile {args.profile} lacks", file=sys.stderr)
    plans = [plan_entry(manifests, args.profile, entry, args.overrides, args.results) for entry in entries]
    configs = [plan.config for plan in plans]
    states = [planned_state(config, args.results, manifests, args.force) for config in configs]
    refused: list[str] = []  # a dry run lists every refusal; a real run stops at the first
    for index, plan in enumerate(plans):
        if err := refusal(plan, states[index], manifests):
            if not args.dry_run:
                raise err
            refused.append(str(err))
            states[index] += ", would be refused (below)"
    if not args.dry_run:
        materialise(manifests, args.profile, entries)
    if args.jobs > 1:
        code = run_grid_jobs(
            plans,
            states,
            jobs=args.jobs,
            overrides=args.overrides,
            force=args.force,
            dry_run=args.dry_run,
            results_root=args.results,
        )
    else:
        code = 0
        for index, config in enumerate(configs, 1):
            state = states[index - 1] if args.dry_run else planned_state(config, args.results, manifests, args.force)
            print(f"[{index}/{len(configs)}] {config.run_id}: {state}", file=sys.stderr)
            if not args.dry_run:
                execute(config, manifests, args.results, force=args.force, set_by=plans[index - 1].set_by)
    for reason, count in Counter(refused).items():  # each reason once, in order of first appearance
        print(f"would be refused ({count} of {len(configs)} runs): error: {reason}", file=sys.stderr)
    return 2 if refused else code


def require_once(grids: list[str], flag: str) -> None:
    """ConfigError (exit 2) when a grid is named twice: its runs would be planned twice and started by two writers
    (the second refused by the first's lock, exit 1 though every run finished)."""
    if repeated := [name for name, count in Counter(grids).items() if count > 1]:
        problem = f"{', '.join(map(repr, repeated))} named more than once"
        raise ConfigError("command line", flag, problem, "each grid once")


def cmd_run(args: argparse.Namespace) -> int:
    manifests = _manifests(args.profile)
    plan = plan_run_id(manifests, args.profile, args.run_id, args.overrides, args.results)
    config = plan.config
    if err := refusal(plan, planned_state(config, args.results, manifests, args.force), manifests):
        raise err
    find_run_file(manifests, args.profile, args.run_id)  # written from its grid if it does not exist yet
    status = execute(config, manifests, args.results, force=args.force, set_by=plan.set_by)
    print(f"{config.run_id}: {status.get('status')}" + (f" ({status['reason']})" if status.get("reason") else ""))
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    """Evaluate a trained run: its config resolved as `run` resolves it (the same key=value overrides), or with
    --recorded the config it recorded (what a one-process `run` starts after training)."""
    from gropd.runs.pipeline import evaluate, recorded_config

    manifests = _manifests(args.profile)
    if args.recorded and args.overrides:
        given = " ".join(args.overrides)
        raise ConfigError("command line", "--recorded", f"given with {given}", "the recorded config alone")
    if args.recorded:
        require_started(args.results, args.profile, args.run_id)
        config = recorded_config(args.results, args.profile, args.run_id)
    else:
        config = plan_run_id(manifests, args.profile, args.run_id, args.overrides, args.results).config
    status = evaluate(config, manifests, args.results, args.shard)
    print(f"{config.run_id}: {status.get('status')}")
    return 0


def require_started(results: Path, profile: str, run_id: str) -> None:
    """ConfigError (exit 2) when the run has no directory under results/<profile>/: it has not run, so there is no
    recorded config to evaluate (and no directory to delete)."""
    run_dir = RunDir.at(results, profile, run_id)
    if not run_dir.root.is_dir():
        problem = f"run {run_id} has not run under {results / profile}/ (no {run_dir.root}/, so no recorded config)"
        expected = f"a run that trained: `python -m gropd.cli run {run_id} --profile {profile}` trains and evaluates it"
        raise ConfigError("command line", "--recorded", problem, expected)


def cmd_status(args: argparse.Namespace) -> int:
    manifests = load_manifests(EXPERIMENTS)
    for profile in args.profiles or []:
        manifests.require_profile(profile)
    if args.results_given and not args.results.is_dir():
        raise ConfigError("command line", "--results", f"{str(args.results)!r} does not exist", "a results directory")
    with_results = [p for p in manifests.profiles if any(args.results.glob(f"{p}/*/status.json"))]
    if not (args.profiles or with_results):
        print(
            f"no runs under {args.results}/ yet: start one (./reproduce.sh table1), or see the committed ones "
            "with --results results/reference"
        )
    profiles = args.profiles or with_results
    tables = {p: format_table(status_rows(manifests, p, args.results, args.overrides)) for p in profiles}
    for profile, table in tables.items():
        print(f"profile {profile} ({args.results / profile}):")
        print(table)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from gropd.report import build

    for path in build(
        args.names,
        profile=args.profile,
        results_root=args.results,
        experiments_dir=EXPERIMENTS,
        out_root=Path("paper_figures"),
    ):
        print(path)
    return 0


def cmd_pin(args: argparse.Namespace) -> int:
    from gropd.config.lock import pin

    lock = pin(load_manifests(EXPERIMENTS), args.profile, EXPERIMENTS / "lock.yaml")  # only this profile's repos
    for repo, entry in {**lock["models"], **lock["datasets"]}.items():
        print(f"{repo}: {entry['full']}")
    return 0


def cmd_world(args: argparse.Namespace) -> int:
    """Build (or load) the tiny world of each recipe the profile's tiny models name (tiny: world 4's)."""
    from gropd.model.checkpoints import tiny_recipe_path
    from gropd.tiny.world import ensure_tiny_world

    manifests = _manifests(args.profile)
    sources = [model["source"] for model in manifests.models[args.profile].values()]
    recipes = dict.fromkeys(tiny_recipe_path(manifests, source) for source in sources if source["kind"] == "tiny")
    if not recipes:
        raise ConfigError("command line", "--profile", f"{args.profile!r} has no tiny models", "tiny or tiny-long")
    for recipe in recipes:
        world = ensure_tiny_world(recipe, rebuild=args.rebuild)
        print(f"tiny world {world.recipe_hash} at {world.directory} ({recipe.name})")
    return 0


def require_writable(directory: Path) -> None:
    """ConfigError (exit 2, nothing written) unless `directory` can be made and written: the nearest of it that
    exists a directory, writable (a name past the filesystem's limit is an OSError already: exit 2, UNUSABLE_PATH)."""
    existing = next(path for path in (directory.absolute(), *directory.absolute().parents) if path.exists())
    if not existing.is_dir():
        problem = f"{existing} is a file, on the path of {directory}"
        raise ConfigError("command line", "--results", problem, "a path whose folders are folders")
    if not os.access(existing, os.W_OK):
        raise ConfigError("command line", "--results", f"{existing} is not writable", "a directory you can write")


def require_trainable(results: Path) -> None:
    """ConfigError (exit 2, nothing written) when `results` lies in paper_figures/ (the published artefacts): runs
    are made elsewhere and moved in on purpose (a committed set, READ_ONLY: layout_guard.require_results_location)."""
    if in_paper_figures(results):
        problem = f"{results} is in paper_figures/, where the published artefacts live"
        raise ConfigError("command line", "--results", problem, "a results directory (default: results/)")


def in_paper_figures(results: Path) -> bool:
    """Whether `results` (links followed) is the project's own paper_figures/ or under it: a folder of that name
    elsewhere is any other folder."""
    return results.resolve().is_relative_to(Path("paper_figures").resolve())


def require_project_root() -> None:
    """ConfigError (exit 2) unless the working directory is the repository's root: every path the commands
    name (experiments/, results/, paper_figures/) is relative to it, as in the README."""
    if not (EXPERIMENTS / "models.yaml").is_file():
        problem = f"{Path.cwd()} has no {EXPERIMENTS / 'models.yaml'}"
        raise ConfigError("working directory", "", problem, "the repository's root (./reproduce.sh goes there itself)")


def _manifests(profile: str) -> Manifests:
    """The manifests, once `profile` is known to be one of them."""
    manifests = load_manifests(EXPERIMENTS)
    manifests.require_profile(profile)
    return manifests


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return int(text)


MAX_SEEDS = 1000  # --seeds N plans N runs of every grid entry: past this it is a typo, not an experiment


def _seed_count(text: str) -> int:
    if _positive(text) > MAX_SEEDS:
        raise argparse.ArgumentTypeError(f"{text} seeds: at most {MAX_SEEDS} (each seed is a run of every grid entry)")
    return int(text)


OVERRIDES = """key.path=value ...
  after the other arguments: overrides of the resolved run config, any key of experiments/train.yaml and the
  profiles (train.steps=5 gropd.lam=0.3 'eval.suites=[add]'); values are YAML; a bad one is refused before
  anything is written."""


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="gropd", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    top.add_argument("--results", help="the results directory (default results/)")
    sub = top.add_subparsers(dest="command", required=True)
    profiles = ", ".join(sorted(path.stem for path in (EXPERIMENTS / "profiles").glob("*.yaml"))) or "paper, tiny"
    grids = ", ".join(grid_names(EXPERIMENTS)) or "see experiments/grids/"
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--profile", default=None, help=f"one of {profiles} (default: paper where CUDA is, else tiny)")
    with_overrides = {"parents": [common], "epilog": OVERRIDES, "formatter_class": argparse.RawDescriptionHelpFormatter}
    runs = sub.add_parser("runs", **with_overrides, help="expand grids into run files and list runs with their state")
    runs.add_argument("--grid", action="append", help=f"a grid ({grids}); repeat for more (default: all)")
    runs.add_argument("--seeds", type=_seed_count, help="seeds 0..N-1 instead of the grids' own")
    grid = sub.add_parser("grid", **with_overrides, help="run every run of one or more grids")
    grid.add_argument("grids", nargs="+", help=f"grid names: {grids}")
    grid.add_argument("--seeds", type=_seed_count, help="seeds 0..N-1 instead of the grid's own")
    grid.add_argument("--jobs", type=_positive, default=1, help="runs at once, each its own process (default 1)")
    grid.add_argument("--dry-run", action="store_true", help="list the runs and what would be refused; write nothing")
    grid.add_argument("--force", action="store_true", help="start every run afresh (its directory deleted first)")
    run = sub.add_parser("run", **with_overrides, help="run one run id (train if needed, then evaluate)")
    run.add_argument("run_id", help="a run of the grids (`runs` lists them), e.g. table1__I4nothink-I1.7nothink__gropd")
    run.add_argument("--force", action="store_true", help="start the run afresh (its directory deleted first)")
    evaluate = sub.add_parser("evaluate", **with_overrides, help="evaluate a trained run (a shard per process)")
    evaluate.add_argument("run_id", help="a run that trained")
    evaluate.add_argument("--recorded", action="store_true", help="with the config the run recorded (config.yaml)")
    status = sub.add_parser(
        "status",
        epilog=OVERRIDES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        help="one table of every run of every grid, from results/",
    )
    status.add_argument(
        "--profile",
        dest="profiles",
        action="append",
        help=f"one of {profiles}; repeat for more (default: those with results)",
    )
    report = sub.add_parser("report", parents=[common], help="rebuild tables/figures from results/ only")
    report.add_argument("names", nargs="+", help=f"artefacts: {', '.join(ARTEFACT_NAMES)}")
    pin = sub.add_parser("pin", help="resolve a profile's Hub revisions into experiments/lock.yaml (its entries only)")
    pin.add_argument("--profile", default="paper")
    world = sub.add_parser("world", help="build (or load) the tiny world of a profile (tiny: world 4)")
    world.add_argument("--rebuild", action="store_true")
    world.add_argument("--profile", default="tiny")
    return top


UNUSABLE_PATH = (errno.ENAMETOOLONG, errno.ENOTDIR, errno.EISDIR, errno.EEXIST, errno.EACCES, errno.EPERM)
UNUSABLE_PATH += (errno.ELOOP, errno.EROFS)  # what a path given is (bad input: exit 2), not what befell a write


def quiet_libraries() -> None:
    """Our own progress lines say what is happening; the libraries' bars and notices only add noise. Said
    through the environment, which transformers and huggingface_hub read when first imported (a command
    that reads no model never loads them) and which the evaluation's own process inherits; a value the user
    set is kept. A script that imported transformers already (a benchmark importing the trainer) is told
    directly."""
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    if "transformers" in sys.modules:
        logging = sys.modules["transformers"].utils.logging
        logging.set_verbosity(logging.log_levels.get(os.environ["TRANSFORMERS_VERBOSITY"], logging.ERROR))
        logging.disable_progress_bar()


def interrupted(signum: int, frame: object) -> None:
    """SIGTERM as Ctrl-C: a grid stops its runs (gropd/runs/jobs.py), a run ends resumable, its lock released."""
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    survive_a_closed_reader()  # `| head` ends the console, never a run (gropd/console.py)
    quiet_libraries()
    args, extra = parser().parse_known_args(argv)
    bad = [item for item in extra if "=" not in item or item.startswith("-")]
    if bad:
        parser().error(f"unrecognised arguments: {' '.join(bad)}")
    args.overrides = extra
    given = args.results
    args.results_given, args.results = given is not None, Path(given or "results")

    handlers = {
        "runs": cmd_runs,
        "grid": cmd_grid,
        "run": cmd_run,
        "evaluate": cmd_evaluate,
        "status": cmd_status,
        "report": cmd_report,
        "pin": cmd_pin,
        "world": cmd_world,
    }
    try:
        if args.command == "evaluate":
            from gropd.runs.evaluation import claim_shard

            args.shard = claim_shard(os.environ)  # before anything asks CUDA (default_profile does)
        if given == "":  # Path("") is the working directory: runs would land among the repository's files
            raise ConfigError("command line", "--results", "empty", "a results directory (default: results/)")
        if getattr(args, "profile", "x") is None:
            args.profile = default_profile()
        require_project_root()
        check_overrides(args.overrides)
        if args.results.is_symlink() and not args.results.exists():
            problem = f"{str(args.results)!r} is a link to {os.readlink(args.results)!r}, which does not exist"
            raise ConfigError("command line", "--results", problem, "a results directory, or a path to make one at")
        if args.results.exists() and not args.results.is_dir() and args.command != "report":  # (report: its own)
            raise ConfigError("command line", "--results", f"{str(args.results)!r} is a file", "a results directory")
        if args.command in ("run", "evaluate") or (args.command == "grid" and not args.dry_run):
            require_results_location(args.results, args.profile)  # links followed: a committed set, the world, ...
            require_trainable(args.results)
            require_writable(args.results / args.profile)
        return handlers[args.command](args)
    except REFUSED as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except OSError as err:  # a path it cannot use (exit 2), or a full or vanished filesystem mid-way: one line
        where = err.filename or f"a write under {args.results}/"  # (a write to an open file names no path: EFBIG)
        print(f"error: {where}: {err.strerror or err}", file=sys.stderr)
        return 2 if err.errno in UNUSABLE_PATH else 1
    except KeyboardInterrupt:
        print(f"interrupted: gropd {args.command} stopped (a run it was on is resumable)", file=sys.stderr)
        return 130
    except Exception as err:
        if (failure := failed_write(err)) is None:
            raise
        free = (
            f", {shutil.disk_usage(args.results).free / 2**20:,.0f} MiB free there now" if args.results.is_dir() else ""
        )
        where = f"a write under {args.results}/ failed{free} ({failure})"
        print(f"error: {where}: make room and run it again (a run resumes from its last checkpoint)", file=sys.stderr)
        return 1


def failed_write(err: Exception) -> str | None:
    """`Type: message` of a library's failed write (a full disk, a quota), None for any other exception: safetensors
    and torch.save say so only in their text (SafetensorError "Error while serializing: I/O error: ...", torch's
    RuntimeError from its zip writer, inline_container.cc), not as an OSError."""
    text = str(err)
    serializing = type(err).__name__ == "SafetensorError" and text.startswith("Error while serializing")
    zip_writer = isinstance(err, RuntimeError) and "inline_container.cc" in text and "StreamReader" not in text
    return f"{type(err).__name__}: {text}" if serializing or zip_writer else None


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, interrupted)
    leave(main())

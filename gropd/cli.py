"""Command line behind ./reproduce.sh: list, run and report the experiments.

    python -m gropd.cli runs    [--profile P] [--grid G ...] [--seeds N]
    python -m gropd.cli grid    G ... [--profile P] [--seeds N] [--jobs N] [--dry-run] [--force]
                                     [key.path=value ...]
    python -m gropd.cli run     RUN_ID [--profile P] [--force] [key.path=value ...]
    python -m gropd.cli evaluate RUN_ID [--profile P] [key.path=value ...]   (one shard per launched process)
    python -m gropd.cli status  [--profile P ...] [key.path=value ...]
    python -m gropd.cli report  NAME ... [--profile P]
    python -m gropd.cli pin     [--profile paper]
    python -m gropd.cli world   (build the tiny world now)

Every command takes --results DIR (default results/): where runs are written and read.
Bad input exits with status 2 and a message naming the file, key and expectation.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from gropd.config import ConfigError, RunConfig, RunFileError, load_manifests
from gropd.model.fit import FitError
from gropd.model.hardware import GPUNotUsableError
from gropd.model.optional import MissingDependencyError
from gropd.record.tracking import check_backends
from gropd.runs.lifecycle import run_state, run_threads
from gropd.runs.pipeline import execute, find_run_file, grid_entries, load_run, materialise, planned_state
from gropd.runs.preflight import preflight

EXPERIMENTS = Path("experiments")


def default_profile() -> str:
    """paper when CUDA is present, tiny where there is no GPU (and say so); a GPU node whose torch cannot
    see its GPUs stops (gropd/model/hardware.py)."""
    from gropd.model.hardware import choose_profile

    profile, why = choose_profile()
    print(f"profile: {profile} ({why}; pass --profile to choose)", file=sys.stderr)
    return profile


def _seeds(count: int | None) -> list[int] | None:
    return list(range(count)) if count else None


def _resolve(manifests, profile: str, run_id: str, overrides: list[str], results: Path) -> RunConfig:
    """The run's config; a run that started keeps the thread count it started with (gropd/runs/lifecycle.py)."""
    config = load_run(manifests, profile, run_id, overrides)
    return run_threads(config, overrides, find_run_file(manifests, profile, run_id), results)


def cmd_runs(args: argparse.Namespace) -> int:
    manifests = load_manifests(EXPERIMENTS)
    from gropd.config.grids import grid_names

    grids = args.grid or grid_names(EXPERIMENTS)
    for entry, path, written in materialise(
        manifests, args.profile, grid_entries(manifests, grids, _seeds(args.seeds))
    ):
        _, state = run_state(_resolve(manifests, args.profile, entry.run_id, [], args.results), args.results, manifests)
        print(f"{entry.run_id:<60} {state:<10} {path} ({written})")
    return 0


def cmd_grid(args: argparse.Namespace) -> int:
    manifests = load_manifests(EXPERIMENTS)
    entries = grid_entries(manifests, args.grids, _seeds(args.seeds))
    materialise(manifests, args.profile, entries)
    configs = [_resolve(manifests, args.profile, entry.run_id, args.overrides, args.results) for entry in entries]
    if not args.dry_run:
        for config in configs:
            preflight(config, manifests)
    for config in configs:
        check_backends(config.tracking)
    if args.jobs > 1:
        from gropd.runs.jobs import run_grid_jobs

        runs_dir = manifests.root / "runs" / args.profile
        return run_grid_jobs(
            configs,
            jobs=args.jobs,
            overrides=args.overrides,
            force=args.force,
            dry_run=args.dry_run,
            results_root=args.results,
            runs_dir=runs_dir,
            manifests=manifests,
        )
    for index, config in enumerate(configs, 1):
        print(
            f"[{index}/{len(configs)}] {config.run_id}: {planned_state(config, args.results, manifests, args.force)}",
            file=sys.stderr,
        )
        if not args.dry_run:
            execute(config, manifests, args.results, force=args.force)
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    manifests = load_manifests(EXPERIMENTS)
    config = _resolve(manifests, args.profile, args.run_id, args.overrides, args.results)
    preflight(config, manifests)
    status = execute(config, manifests, args.results, force=args.force)
    print(f"{config.run_id}: {status.get('status')}" + (f" ({status['reason']})" if status.get("reason") else ""))
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    from gropd.runs.pipeline import evaluate

    manifests = load_manifests(EXPERIMENTS)
    config = _resolve(manifests, args.profile, args.run_id, args.overrides, args.results)
    status = evaluate(config, manifests, args.results, args.shard)
    print(f"{config.run_id}: {status.get('status')}")
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    from gropd.runs.status import format_table, status_rows

    manifests = load_manifests(EXPERIMENTS)
    with_results = [p for p in manifests.profiles if any(args.results.glob(f"{p}/*/status.json"))]
    for profile in args.profiles or with_results or manifests.profiles:
        print(f"profile {profile} ({args.results / profile}):")
        print(format_table(status_rows(manifests, profile, args.results, args.overrides)))
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

    lock = pin(load_manifests(EXPERIMENTS), args.profile, EXPERIMENTS / "lock.yaml")
    for repo, entry in {**lock["models"], **lock["datasets"]}.items():
        print(f"{repo}: {entry['full']}")
    return 0


def cmd_world(args: argparse.Namespace) -> int:
    from gropd.tiny.world import ensure_tiny_world

    world = ensure_tiny_world(EXPERIMENTS / "tiny_world.yaml", rebuild=args.rebuild)
    print(f"tiny world {world.recipe_hash} at {world.directory}")
    return 0


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return int(text)


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="gropd", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    top.add_argument("--results", type=Path, default=Path("results"), help="the results directory (default results/)")
    sub = top.add_subparsers(dest="command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--profile", choices=None, default=None, help="paper or tiny (default: paper with CUDA)")
    runs = sub.add_parser("runs", parents=[common], help="expand grids into run files and list runs with their state")
    runs.add_argument("--grid", action="append")
    runs.add_argument("--seeds", type=int)
    grid = sub.add_parser("grid", parents=[common], help="run every run of one or more grids")
    grid.add_argument("grids", nargs="+")
    grid.add_argument("--seeds", type=int, help="seeds 0..N-1 instead of the grid's own")
    grid.add_argument("--jobs", type=_positive, default=1, help="runs at once, each its own process (default 1)")
    grid.add_argument("--dry-run", action="store_true")
    grid.add_argument("--force", action="store_true")
    run = sub.add_parser("run", parents=[common], help="run one run id (train if needed, then evaluate)")
    run.add_argument("run_id")
    run.add_argument("--force", action="store_true")
    evaluate = sub.add_parser("evaluate", parents=[common], help="evaluate a trained run (a shard per process)")
    evaluate.add_argument("run_id")
    status = sub.add_parser("status", help="one table of every run of every grid, from results/")
    status.add_argument("--profile", dest="profiles", action="append", help="default: profiles with results")
    report = sub.add_parser("report", parents=[common], help="rebuild tables/figures from results/ only")
    report.add_argument("names", nargs="+")
    pin = sub.add_parser("pin", help="resolve the paper's short revisions into experiments/lock.yaml")
    pin.add_argument("--profile", default="paper")
    world = sub.add_parser("world", help="build (or load) the tiny world")
    world.add_argument("--rebuild", action="store_true")
    return top


def quiet_libraries() -> None:
    """Our own progress lines say what is happening; the libraries' bars and notices only add noise."""
    import transformers

    transformers.utils.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()


def main(argv: list[str] | None = None) -> int:
    quiet_libraries()
    args, extra = parser().parse_known_args(argv)
    bad = [item for item in extra if "=" not in item or item.startswith("-")]
    if bad:
        parser().error(f"unrecognised arguments: {' '.join(bad)}")
    args.overrides = extra
    if args.command == "evaluate":
        from gropd.runs.evaluation import claim_shard

        args.shard = claim_shard(os.environ)  # before anything asks CUDA (default_profile does)
    if getattr(args, "profile", "x") is None:
        args.profile = default_profile()
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
        return handlers[args.command](args)
    except (ConfigError, RunFileError, MissingDependencyError, FitError, GPUNotUsableError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

"""Command line behind ./reproduce.sh: list, run and report the experiments.

    python -m gropd.cli runs    [--profile P] [--grid G ...] [--seeds N]
    python -m gropd.cli grid    G ... [--profile P] [--seeds N] [--dry-run] [--force] [key.path=value ...]
    python -m gropd.cli run     RUN_ID [--profile P] [--force] [key.path=value ...]
    python -m gropd.cli report  NAME ... [--profile P]
    python -m gropd.cli pin     [--profile paper]
    python -m gropd.cli world   (build the tiny world now)

Bad input exits with status 2 and a message naming the file, key and expectation.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from gropd.config import ConfigError, load_manifests
from gropd.pipeline import execute, grid_entries, load_run, materialise, run_state

EXPERIMENTS = Path("experiments")
RESULTS = Path("results")


def default_profile() -> str:
    """paper when CUDA is present, tiny otherwise (and say so)."""
    import torch

    profile, why = ("paper", "CUDA is available") if torch.cuda.is_available() else ("tiny", "no CUDA device found")
    print(f"profile: {profile} ({why}; pass --profile to choose)", file=sys.stderr)
    return profile


def _seeds(count: int | None) -> list[int] | None:
    return list(range(count)) if count else None


def cmd_runs(args: argparse.Namespace) -> int:
    manifests = load_manifests(EXPERIMENTS)
    from gropd.config.grids import grid_names

    grids = args.grid or grid_names(EXPERIMENTS)
    for entry, path, written in materialise(
        manifests, args.profile, grid_entries(manifests, grids, _seeds(args.seeds))
    ):
        config = load_run(manifests, args.profile, entry.run_id)
        _, state = run_state(config, RESULTS)
        print(f"{entry.run_id:<60} {state:<10} {path} ({written})")
    return 0


def cmd_grid(args: argparse.Namespace) -> int:
    manifests = load_manifests(EXPERIMENTS)
    entries = grid_entries(manifests, args.grids, _seeds(args.seeds))
    materialise(manifests, args.profile, entries)
    configs = [load_run(manifests, args.profile, entry.run_id, args.overrides) for entry in entries]
    if args.profile == "paper":
        _require_pinned(manifests, configs)
    for index, config in enumerate(configs, 1):
        state = "forced (started afresh)" if args.force else run_state(config, RESULTS)[1]
        print(f"[{index}/{len(configs)}] {config.run_id}: {state}", file=sys.stderr)
        if not args.dry_run:
            execute(config, manifests, RESULTS, force=args.force)
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    manifests = load_manifests(EXPERIMENTS)
    config = load_run(manifests, args.profile, args.run_id, args.overrides)
    if args.profile == "paper":
        _require_pinned(manifests, [config])
    status = execute(config, manifests, RESULTS, force=args.force)
    print(f"{config.run_id}: {status.get('status')}" + (f" ({status['reason']})" if status.get("reason") else ""))
    return 0


def _require_pinned(manifests, configs) -> None:
    from gropd.checkpoints import checkpoint_ref

    for config in configs:
        labels = (
            [config.model]
            if config.kind == "eval"
            else [manifests.pairings[config.pairing][side]["model"] for side in ("student", "teacher")]
        )
        for label in labels:
            checkpoint_ref(manifests, config.profile, label)


def cmd_report(args: argparse.Namespace) -> int:
    from gropd.report import build

    for path in build(
        args.names,
        profile=args.profile,
        results_root=RESULTS,
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


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(
        prog="gropd", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = top.add_subparsers(dest="command", required=True)
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--profile", choices=None, default=None, help="paper or tiny (default: paper with CUDA)")
    runs = sub.add_parser("runs", parents=[common], help="expand grids into run files and list runs with their state")
    runs.add_argument("--grid", action="append")
    runs.add_argument("--seeds", type=int)
    grid = sub.add_parser("grid", parents=[common], help="run every run of one or more grids")
    grid.add_argument("grids", nargs="+")
    grid.add_argument("--seeds", type=int, help="seeds 0..N-1 instead of the grid's own")
    grid.add_argument("--dry-run", action="store_true")
    grid.add_argument("--force", action="store_true")
    run = sub.add_parser("run", parents=[common], help="run one run id (train if needed, then evaluate)")
    run.add_argument("run_id")
    run.add_argument("--force", action="store_true")
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
    if getattr(args, "profile", "x") is None:
        args.profile = default_profile()
    handlers = {
        "runs": cmd_runs,
        "grid": cmd_grid,
        "run": cmd_run,
        "report": cmd_report,
        "pin": cmd_pin,
        "world": cmd_world,
    }
    try:
        return handlers[args.command](args)
    except ConfigError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

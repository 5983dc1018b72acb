"""One SFT run of a tiny-world recipe, measured along the way: where to stop a student (an earlier checkpoint).

    python benchmarks/tiny_run_curve.py --recipe R --run B4 --every 50 --from 150 --out /tmp/curve
    python benchmarks/tiny_run_curve.py --recipe R --post I1.7 --base DIR --out /tmp/post
    python benchmarks/tiny_run_curve.py --recipe R --adopt /tmp/curve /tmp/post ... --name parts

A curve (`--run`) trains run RUN exactly as the world's build does (gropd.tiny.world.train_label: the same recipe,
seed and thread count, so the same bits; a continued run reads its base from OUT/models/<base>), saves the model
every `--every` steps from `--from` on under OUT/steps/<step>/ and the final one under OUT/models/<run>/, and prints
each saved step's greedy held-out accuracy per mode (heldout_accuracy, as world.json records it); OUT/curve.json keeps
them, with the run's seconds and the loss of every step. `--post LABEL --base DIR` trains a continued run as the build
does (build_run), its base the model directory DIR, into OUT (entries-<LABEL>.json: its world.json entry). `--adopt`
then makes the folders one world under `--root` (default results/tiny/world), named `--name`, whose world.json holds
each curve's run and the recipe's checkpoints of it (at a saved step) and each post-training's label, by label hash:
the build (`ensure_tiny_world`) copies models whose label hash it finds there instead of training them again.
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path

import torch
from transformers import AutoTokenizer, Qwen3ForCausalLM

from fileio import atomic_write_text
from gropd.tiny.recipe import ContinuedRun, EarlierCheckpoint, Recipe, label_hash, load_recipe
from gropd.tiny.tokenizer import build_tokenizer
from gropd.tiny.world import build_run, heldout_accuracy, loss_curve, set_generation_defaults, train_label


def train_curve(recipe_path: Path, run: str, every: int, first: int, out: Path) -> dict:
    """Train `run`, saving every `every` steps from `first` on; measure each saved step; write OUT/curve.json."""
    recipe, _ = load_recipe(recipe_path)
    torch.set_num_threads(recipe.num_threads)
    build_tokenizer().save_pretrained(out / "tokenizer")
    tokenizer = AutoTokenizer.from_pretrained(out / "tokenizer")
    modes = recipe.modes(run)

    def save(step: int, model: Qwen3ForCausalLM) -> None:
        if step >= first and step % every == 0:
            set_generation_defaults(model, modes, tokenizer).save_pretrained(out / "steps" / str(step))

    start = time.perf_counter()
    model, losses = train_label(recipe, run, tokenizer, on_step=save, models_dir=out / "models")
    seconds = time.perf_counter() - start
    model.save_pretrained(out / "models" / run)
    curve = {}
    for folder in sorted((out / "steps").iterdir(), key=lambda p: int(p.name)):
        trained = Qwen3ForCausalLM.from_pretrained(folder)
        curve[folder.name] = {mode: heldout_accuracy(trained, tokenizer, mode, recipe) for mode in modes}
        print(f"step {folder.name}: {json.dumps(curve[folder.name])}", flush=True)
    final = {mode: heldout_accuracy(model, tokenizer, mode, recipe) for mode in modes}
    print(f"final: {json.dumps(final)}", flush=True)
    result = {"run": run, "seconds": round(seconds, 1), "losses": losses, "curve": curve, "final": final}
    atomic_write_text(out / "curve.json", json.dumps(result) + "\n")
    return result


def post_train(recipe_path: Path, label: str, base: Path, out: Path) -> dict:
    """Train continued run `label` from the model directory `base`, as the build does; write its entry."""
    recipe, _ = load_recipe(recipe_path)
    spec = recipe.models[label]
    if not isinstance(spec, ContinuedRun):
        raise SystemExit(f"{recipe_path}: models.{label} is not a continued run (continue_from)")
    build_tokenizer().save_pretrained(out / "tokenizer")
    shutil.copytree(base, out / "models" / spec.continue_from, dirs_exist_ok=True)
    atomic_write_text(out / "base.txt", f"{base.resolve()}\n")  # adopt checks it against the recipe
    entries = build_run(recipe, label, out)
    atomic_write_text(out / f"entries-{label}.json", json.dumps(entries, indent=2) + "\n")
    return entries


def curve_entries(recipe: Recipe, folder: Path) -> dict[str, dict]:
    """world.json entries of a curve folder's run and of the recipe's checkpoints of it (copied to models/)."""
    result = json.loads((folder / "curve.json").read_text())
    run = result["run"]
    entries = {}
    for label in recipe.runs()[run]:
        spec = recipe.models[label]
        if isinstance(spec, EarlierCheckpoint):
            if str(spec.step) not in result["curve"]:
                raise SystemExit(f"models.{label}.step {spec.step} is not a saved step of {folder}")
            shutil.copytree(folder / "steps" / str(spec.step), folder / "models" / label, dirs_exist_ok=True)
            entries[label] = {"checkpoint_of": run, "step": spec.step, "accuracy": result["curve"][str(spec.step)]}
        else:
            entries[label] = {"accuracy": result["final"], "build_seconds": result["seconds"]}
            entries[label]["loss_curve"] = loss_curve(result["losses"])
    return entries


def adopt(recipe_path: Path, folders: list[Path], root: Path, name: str) -> Path:
    """Make root/name a world holding every model the folders made, each entry with its label hash."""
    recipe, _ = load_recipe(recipe_path)
    target = Path(root) / name
    entries: dict[str, dict] = {}
    for folder in folders:
        made = (
            curve_entries(recipe, folder)
            if (folder / "curve.json").exists()
            else {k: v for path in folder.glob("entries-*.json") for k, v in json.loads(path.read_text()).items()}
        )
        for label in made:
            spec = recipe.models[label]
            base = recipe.models.get(spec.continue_from) if isinstance(spec, ContinuedRun) else None
            if isinstance(base, EarlierCheckpoint) and not (folder / "base.txt").read_text().strip().endswith(
                f"steps/{base.step}"
            ):
                raise SystemExit(
                    f"{folder}: {label} continued {(folder / 'base.txt').read_text().strip()}, not "
                    f"step {base.step} of {base.checkpoint_of}'s run that the recipe names"
                )
        for label, entry in made.items():
            shutil.copytree(folder / "models" / label, target / "models" / label, dirs_exist_ok=True)
            model = Qwen3ForCausalLM.from_pretrained(target / "models" / label)
            entry.update({"label_hash": label_hash(recipe, label), "modes": list(recipe.modes(label))})
            entries[label] = {**entry, "parameters": sum(p.numel() for p in model.parameters())}
    build_tokenizer().save_pretrained(target / "tokenizer")
    atomic_write_text(target / "world.json", json.dumps({"models": entries}, indent=2) + "\n")
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", type=Path, required=True)
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--run", help="train this run, saving and measuring its checkpoints")
    what.add_argument("--post", help="train this continued run from --base")
    what.add_argument("--adopt", type=Path, nargs="+", help="folders made by --run / --post")
    parser.add_argument("--base", type=Path, help="the model directory --post continues")
    parser.add_argument("--every", type=int, default=100)
    parser.add_argument("--from", dest="first", type=int, default=100)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--root", type=Path, default=Path("results/tiny/world"))
    parser.add_argument("--name", default="parts")
    args = parser.parse_args()
    if args.run:
        train_curve(args.recipe, args.run, args.every, args.first, args.out)
    elif args.post:
        post_train(args.recipe, args.post, args.base, args.out)
    else:
        print(adopt(args.recipe, args.adopt, args.root, args.name))


if __name__ == "__main__":
    main()

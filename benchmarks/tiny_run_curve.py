"""One SFT run of a tiny-world recipe, measured along the way: where to stop a student (an earlier checkpoint).

    python benchmarks/tiny_run_curve.py --recipe experiments/tiny_world_long.yaml --run B4 --every 100 \\
        --out /tmp/curve [--from 300]

Trains run `--run` exactly as the world's build does (gropd.tiny.world.train_label: the same recipe, seed and
thread count, so the same bits), saves the model every `--every` steps from `--from` on under OUT/steps/<step>/,
the final model under OUT/models/<run>/ and the tokenizer under OUT/tokenizer/, and prints each saved step's greedy
held-out accuracy per mode (heldout_accuracy, as world.json records it); OUT/curve.json keeps them, with the run's
seconds and loss of every step. `--adopt STEP --root results/tiny/world` then makes OUT a world under the root whose
world.json names the run and the recipe's checkpoint of it at STEP (which must be the recipe's `step` for it):
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
from gropd.tiny.recipe import EarlierCheckpoint, label_hash, load_recipe
from gropd.tiny.tokenizer import build_tokenizer
from gropd.tiny.world import heldout_accuracy, loss_curve, set_generation_defaults, train_label


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


def adopt(recipe_path: Path, out: Path, step: int, root: Path) -> Path:
    """Make OUT a world under `root` holding the run and its checkpoint at `step`, with their label hashes."""
    recipe, _ = load_recipe(recipe_path)
    result = json.loads((out / "curve.json").read_text())
    run = result["run"]
    checkpoints = [label for label in recipe.runs()[run] if label != run]
    entries = {}
    for label in checkpoints:
        spec = recipe.models[label]
        assert isinstance(spec, EarlierCheckpoint)
        if spec.step != step:
            raise SystemExit(f"{recipe_path}: models.{label}.step is {spec.step}, not {step}: set it first")
        shutil.copytree(out / "steps" / str(step), out / "models" / label, dirs_exist_ok=True)
        trained = Qwen3ForCausalLM.from_pretrained(out / "models" / label)
        entries[label] = {"checkpoint_of": run, "step": step, "accuracy": result["curve"][str(step)]}
        entries[label]["parameters"] = sum(p.numel() for p in trained.parameters())
    model = Qwen3ForCausalLM.from_pretrained(out / "models" / run)
    entries[run] = {
        "accuracy": result["final"],
        "parameters": sum(p.numel() for p in model.parameters()),
        "build_seconds": result["seconds"],
        "loss_curve": loss_curve(result["losses"]),
    }
    for label, entry in entries.items():
        entry.update({"label_hash": label_hash(recipe, label), "modes": list(recipe.modes(label))})
    target = Path(root) / out.name
    if target.resolve() != out.resolve():
        shutil.copytree(out / "models", target / "models", dirs_exist_ok=True)
        shutil.copytree(out / "tokenizer", target / "tokenizer", dirs_exist_ok=True)
    atomic_write_text(target / "world.json", json.dumps({"models": entries}, indent=2) + "\n")
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", type=Path, required=True)
    parser.add_argument("--run", required=True)
    parser.add_argument("--every", type=int, default=100)
    parser.add_argument("--from", dest="first", type=int, default=100)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--adopt", type=int, help="the step of the recipe's checkpoint of the run (after training)")
    parser.add_argument("--root", type=Path, default=Path("results/tiny/world"))
    args = parser.parse_args()
    if args.adopt is None:
        train_curve(args.recipe, args.run, args.every, args.first, args.out)
    else:
        print(adopt(args.recipe, args.out, args.adopt, args.root))


if __name__ == "__main__":
    main()

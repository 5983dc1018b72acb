"""The tiny world's build-and-cache entry point: recipe → tokenizer + five SFT models.

`ensure_tiny_world()` reads `experiments/tiny_world.yaml`, and unless it is already
built, builds everything deterministically from the recipe's seeds into

    results/tiny/world/<recipe_hash12>/
      tokenizer/            save_pretrained directory (AutoTokenizer loads it)
      models/<label>/       save_pretrained directory (AutoModelForCausalLM loads it)
      world.json            recipe hash, build seconds, per-model/mode/task held-out accuracy

The hash covers the parsed recipe and GENERATOR_VERSION (bump it whenever the tokenizer,
tasks, templates or SFT code change what gets built). The build happens in a temporary
directory that is renamed into place, so a cache directory is either complete or absent.
A model whose own settings (label hash) are unchanged is copied from an earlier world
under the same root instead of being trained again, so editing one model's recipe
retrains only that model.

Held-out accuracy here is greedy decoding on the first `eval.questions_per_task`
evaluation questions of each task: the fraction whose last \\boxed{} integer equals
the gold answer (a quick regex check; the suite's real grader lives in eval/).
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import re
import shutil
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import torch
import yaml
from transformers import AutoTokenizer, PreTrainedTokenizerBase, Qwen3ForCausalLM

from gropd.templates import render_prompt, stop_token_ids
from gropd.tiny import tasks as tiny_tasks
from gropd.tiny.sft import ModelShape, SFTSettings, build_model, make_examples, sft_train
from gropd.tiny.tokenizer import build_tokenizer

GENERATOR_VERSION = f"world1-tasks{tiny_tasks.VERSION}"
LABELS = ("B1.7", "B4", "I1.7", "I4", "I32")


@dataclass(frozen=True)
class ModelRecipe:
    """How one labelled model is made: its architecture and its SFT."""

    shape: ModelShape
    sft: SFTSettings


@dataclass(frozen=True)
class Recipe:
    """The whole tiny world: shared settings and one ModelRecipe per label."""

    instruction: str
    num_threads: int
    parallel_builds: int
    eval_questions_per_task: int
    eval_max_new_tokens: int
    eval_batch_size: int
    models: dict[str, ModelRecipe]


def _typed(cls: type, data: object, where: str) -> object:
    """Build dataclass `cls` from a mapping, naming the file and key on unknown or missing keys."""
    if not isinstance(data, dict):
        raise ValueError(f"{where}: expected a mapping of {[f.name for f in fields(cls)]}, got {data!r}")
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise ValueError(f"{where}: unknown key(s) {unknown}; expected some of {sorted(known)}")
    try:
        return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in data.items()})
    except TypeError as err:
        raise ValueError(f"{where}: {err}") from err


def parse_recipe(data: dict, source: str) -> Recipe:
    """A typed Recipe from the recipe YAML's parsed content (`source` names the file in errors)."""
    top = {"instruction", "num_threads", "parallel_builds", "eval", "models"}
    if not isinstance(data, dict) or set(data) != top:
        raise ValueError(f"{source}: expected exactly the top-level keys {sorted(top)}")
    ev = data["eval"]
    if not isinstance(ev, dict) or set(ev) != {"questions_per_task", "max_new_tokens", "batch_size"}:
        raise ValueError(f"{source}: key 'eval' needs questions_per_task, max_new_tokens, batch_size")
    models = {}
    for label, spec in data["models"].items():
        if label not in LABELS:
            raise ValueError(f"{source}: models.{label}: unknown label; valid labels: {', '.join(LABELS)}")
        if not isinstance(spec, dict) or set(spec) != {"shape", "sft"}:
            raise ValueError(f"{source}: models.{label}: expected exactly the keys ['sft', 'shape']")
        models[label] = ModelRecipe(
            shape=_typed(ModelShape, spec["shape"], f"{source}: models.{label}.shape"),
            sft=_typed(SFTSettings, spec["sft"], f"{source}: models.{label}.sft"),
        )
    return Recipe(
        instruction=str(data["instruction"]),
        num_threads=int(data["num_threads"]),
        parallel_builds=int(data["parallel_builds"]),
        eval_questions_per_task=int(ev["questions_per_task"]),
        eval_max_new_tokens=int(ev["max_new_tokens"]),
        eval_batch_size=int(ev["batch_size"]),
        models=models,
    )


def recipe_hash(data: dict) -> str:
    """sha256 over GENERATOR_VERSION and the recipe's canonical JSON (comments and key order don't count)."""
    canonical = json.dumps({"generator": GENERATOR_VERSION, "recipe": data}, sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()


def label_hash(recipe: Recipe, label: str) -> str:
    """sha256 of everything that decides model `label`'s weights and measured accuracy."""
    spec = recipe.models[label]
    content = {
        "generator": GENERATOR_VERSION,
        "instruction": recipe.instruction,
        "num_threads": recipe.num_threads,
        "eval": [recipe.eval_questions_per_task, recipe.eval_max_new_tokens, recipe.eval_batch_size],
        "shape": asdict(spec.shape),
        "sft": asdict(spec.sft),
    }
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()


def find_built_label(root: Path, key: str) -> tuple[Path, dict] | None:
    """A model already built under `root` with label hash `key`: (its directory, its world.json entry)."""
    for world_json in sorted(Path(root).glob("*/world.json")):
        for label, entry in json.loads(world_json.read_text())["models"].items():
            if entry.get("label_hash") == key and (world_json.parent / "models" / label).is_dir():
                return world_json.parent / "models" / label, entry
    return None


def load_recipe(path: Path) -> tuple[Recipe, str]:
    """The typed recipe at `path` and its full hash."""
    data = yaml.safe_load(Path(path).read_text())
    return parse_recipe(data, str(path)), recipe_hash(data)


def train_label(recipe: Recipe, label: str, tokenizer: PreTrainedTokenizerBase) -> Qwen3ForCausalLM:
    """Build and SFT-train the model `label` exactly as the recipe says (deterministic)."""
    spec = recipe.models[label]
    model = build_model(spec.shape, tokenizer, seed=spec.sft.seed)
    examples = make_examples(tokenizer, spec.sft.modes, recipe.instruction, spec.sft.pool_per_task, spec.sft.seed)
    sft_train(model, examples, spec.sft, tokenizer.pad_token_id, recipe.num_threads, log_every=50)
    model.generation_config.eos_token_id = stop_token_ids(spec.sft.modes[0], tokenizer)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model


_BOXED = re.compile(r"\\boxed\{(-?\d+)\}")


def boxed_answer(text: str) -> str | None:
    """The integer inside the last \\boxed{...} of `text`, or None."""
    found = _BOXED.findall(text)
    return found[-1] if found else None


@torch.no_grad()
def greedy_responses(
    model: Qwen3ForCausalLM,
    tokenizer: PreTrainedTokenizerBase,
    prompts: list[str],
    mode: str,
    max_new_tokens: int,
    batch_size: int,
) -> list[list[int]]:
    """Greedy response ids for each prompt, cut after the first stop token (kept)."""
    stops = stop_token_ids(mode, tokenizer)
    tokenizer.padding_side = "left"
    out = []
    for start in range(0, len(prompts), batch_size):
        enc = tokenizer(
            prompts[start : start + batch_size], return_tensors="pt", padding=True, add_special_tokens=False
        )
        gen = model.generate(
            **enc,
            do_sample=False,
            max_new_tokens=max_new_tokens,
            eos_token_id=stops,
            pad_token_id=tokenizer.pad_token_id,
        )
        for row in gen[:, enc["input_ids"].shape[1] :].tolist():
            cut = next((i + 1 for i, t in enumerate(row) if t in stops), len(row))
            out.append(row[:cut])
    return out


def heldout_accuracy(
    model: Qwen3ForCausalLM, tokenizer: PreTrainedTokenizerBase, mode: str, recipe: Recipe
) -> dict[str, float]:
    """Greedy held-out accuracy per task, their mean ("avg") and the mean response length in tokens."""
    result, lengths = {}, []
    for task in tiny_tasks.TASKS:
        records = tiny_tasks.eval_questions(task, recipe.eval_questions_per_task)
        prompts = [render_prompt(r["question"], mode, tokenizer, recipe.instruction) for r in records]
        responses = greedy_responses(
            model, tokenizer, prompts, mode, recipe.eval_max_new_tokens, recipe.eval_batch_size
        )
        correct = [
            boxed_answer(tokenizer.decode(ids)) == r["answer"] for ids, r in zip(responses, records, strict=True)
        ]
        result[task] = sum(correct) / len(correct)
        lengths += [len(ids) for ids in responses]
    result["avg"] = sum(result[t] for t in tiny_tasks.TASKS) / len(tiny_tasks.TASKS)
    result["mean_tokens"] = sum(lengths) / len(lengths)
    return result


@dataclass(frozen=True)
class TinyWorld:
    """A built tiny world: where its tokenizer and models are, and what was measured."""

    directory: Path
    recipe_hash: str
    instruction: str
    info: dict

    @property
    def tokenizer_dir(self) -> Path:
        return self.directory / "tokenizer"

    def model_dir(self, label: str) -> Path:
        """The save_pretrained directory of model `label` (ValueError for an unknown label)."""
        if label not in self.info["models"]:
            raise ValueError(f"tiny world has no model {label!r}; labels: {', '.join(self.info['models'])}")
        return self.directory / "models" / label


def build_label(recipe: Recipe, label: str, target: Path) -> dict:
    """Train model `label` into target/models/<label>/ and measure it; return its world.json entry."""
    torch.set_num_threads(recipe.num_threads)
    tokenizer = AutoTokenizer.from_pretrained(target / "tokenizer")
    spec = recipe.models[label]
    print(f"[tiny world] training {label} ({spec.sft.steps} steps)", flush=True)
    start = time.perf_counter()
    model = train_label(recipe, label, tokenizer)
    seconds = time.perf_counter() - start
    model.save_pretrained(target / "models" / label)
    accuracy = {mode: heldout_accuracy(model, tokenizer, mode, recipe) for mode in spec.sft.modes}
    print(f"[tiny world] {label}: {seconds:.0f} s, accuracy {json.dumps(accuracy)}", flush=True)
    return {
        "label_hash": label_hash(recipe, label),
        "build_seconds": round(seconds, 1),
        "modes": list(spec.sft.modes),
        "parameters": sum(p.numel() for p in model.parameters()),
        "accuracy": accuracy,
    }


def build_world(recipe: Recipe, full_hash: str, target: Path, root: Path) -> dict:
    """Build every model of `recipe` into `target` (a fresh directory); return world.json's content.

    A model whose label hash matches one already built in another world under `root` is
    copied from there (its SFT would give the same bits). The others train in
    `recipe.parallel_builds` worker processes, each with `recipe.num_threads` threads
    (a model's bits depend on its thread count, not on which worker trains it).
    """
    build_tokenizer().save_pretrained(target / "tokenizer")
    start = time.perf_counter()
    entries = {}
    for label in recipe.models:
        found = find_built_label(root, label_hash(recipe, label))
        if found is not None:
            shutil.copytree(found[0], target / "models" / label)
            entries[label] = {**found[1], "reused_from": found[0].parent.parent.name}
    jobs = [(recipe, label, target) for label in recipe.models if label not in entries]
    if recipe.parallel_builds > 1 and len(jobs) > 1:
        with multiprocessing.get_context("spawn").Pool(recipe.parallel_builds) as pool:
            built = pool.starmap(build_label, jobs)
    else:
        built = [build_label(*job) for job in jobs]
    entries.update({job[1]: entry for job, entry in zip(jobs, built, strict=True)})
    info = {
        "recipe_hash": full_hash,
        "generator_version": GENERATOR_VERSION,
        "num_threads": recipe.num_threads,
        "parallel_builds": recipe.parallel_builds,
        "build_wall_seconds": round(time.perf_counter() - start, 1),
        "accuracy_method": f"greedy, first {recipe.eval_questions_per_task} eval questions per task",
        "models": {label: entries[label] for label in recipe.models},
    }
    (target / "world.json").write_text(json.dumps(info, indent=2) + "\n")
    return info


def ensure_tiny_world(
    recipe_path: Path = Path("experiments/tiny_world.yaml"),
    root: Path = Path("results/tiny/world"),
    rebuild: bool = False,
) -> TinyWorld:
    """The tiny world of `recipe_path`, built under `root/<hash12>/` unless it is there already."""
    recipe, full_hash = load_recipe(recipe_path)
    final = Path(root) / full_hash[:12]
    if rebuild or not (final / "world.json").exists():
        staging = Path(root) / f".building-{full_hash[:12]}-{os.getpid()}"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        build_world(recipe, full_hash, staging, Path(root))
        if final.exists() and rebuild:
            old = Path(root) / f".old-{full_hash[:12]}-{os.getpid()}"
            os.replace(final, old)
            shutil.rmtree(old)
        try:
            os.replace(staging, final)
        except OSError:  # another process finished the same world first: keep theirs
            if not (final / "world.json").exists():
                raise
            shutil.rmtree(staging)
    info = json.loads((final / "world.json").read_text())
    return TinyWorld(directory=final, recipe_hash=full_hash[:12], instruction=recipe.instruction, info=info)


def main() -> None:
    """Command line: build (or find) the tiny world and print where it is and what it measured."""
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recipe", type=Path, default=Path("experiments/tiny_world.yaml"))
    parser.add_argument("--root", type=Path, default=Path("results/tiny/world"))
    parser.add_argument("--rebuild", action="store_true")
    args = parser.parse_args()
    world = ensure_tiny_world(args.recipe, args.root, args.rebuild)
    print(world.directory)
    print(json.dumps(world.info["models"], indent=2))


if __name__ == "__main__":
    main()

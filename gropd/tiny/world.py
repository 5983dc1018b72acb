"""The tiny world's build-and-cache entry point: recipe → tokenizer + five SFT models.

`ensure_tiny_world()` reads `experiments/tiny_world.yaml`, and unless it is already
built, builds everything deterministically from the recipe's seeds into

    results/tiny/world/<recipe_hash12>/
      tokenizer/            save_pretrained directory (AutoTokenizer loads it)
      models/<label>/       save_pretrained directory (AutoModelForCausalLM loads it)
      world.json            recipe hash, build seconds, per-model/mode/task held-out accuracy, the sha256 of
                            every file (`files`: a run refuses a world whose bytes changed)

A model is its own SFT run from random weights (`shape` + `sft`: pretraining), a run that
continues another model's weights (`continue_from` + `sft`: post-training), or an *earlier
checkpoint* of another label's run (`checkpoint_of` + `step`). So the family is built the way
Qwen3's is: base models pretrained on plain text of every format, each instruct model its base
post-trained on the chat formats, and the students the teachers' own runs stopped early. A run
saves its checkpoints on its way; runs train in waves, a continued run after its base.

The recipe, its hash and each model's label hash are gropd/tiny/recipe.py's. The build happens in a temporary
directory that is renamed into place, so a cache directory is either complete or absent.
A model whose own settings (label hash) are unchanged is copied from an earlier world
under the same root instead of being trained again, so editing one model's recipe
retrains only that model.

Held-out accuracy here is greedy decoding on the first `eval.questions_per_task`
evaluation questions of each task: the fraction whose last \\boxed{} integer equals
the gold answer (a quick regex check; the suite's real grader lives in eval/).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import AutoTokenizer, PreTrainedTokenizerBase, Qwen3ForCausalLM

from eval import tiny_tasks
from gropd.templates import render_prompt, stop_token_ids
from gropd.tiny.recipe import (
    GENERATOR_VERSION,
    WORLD_FILES,
    WORLD_ROOT,
    ContinuedRun,
    EarlierCheckpoint,
    Recipe,
    label_hash,
    load_recipe,
    world_directory,
    world_files,
)
from gropd.tiny.sft import build_model, make_examples, sft_train
from gropd.tiny.tokenizer import build_tokenizer

LOSS_WINDOW = 25  # steps per point of a run's recorded loss curve


def find_built_label(root: Path, key: str) -> tuple[Path, dict] | None:
    """A model already built under `root` with label hash `key`: (its directory, its world.json entry)."""
    for world_json in sorted(Path(root).glob("*/world.json")):
        for label, entry in json.loads(world_json.read_text())["models"].items():
            if entry.get("label_hash") == key and (world_json.parent / "models" / label).is_dir():
                return world_json.parent / "models" / label, entry
    return None


def train_label(
    recipe: Recipe,
    label: str,
    tokenizer: PreTrainedTokenizerBase,
    on_step: Callable[[int, Qwen3ForCausalLM], None] | None = None,
    models_dir: Path | None = None,
) -> tuple[Qwen3ForCausalLM, list[float]]:
    """Build and SFT-train the model `label` exactly as the recipe says (deterministic): its own run,
    or its run up to the checkpoint's step; a continued run starts from its base, read from
    `models_dir/<base>`. Returns the model and the loss of every step."""
    spec = recipe.models[label]
    run = recipe.models[recipe.run_of(label)]
    if isinstance(run, ContinuedRun):
        if models_dir is None:
            raise ValueError(f"{label} continues {run.continue_from}: train_label needs the directory of its base")
        model = Qwen3ForCausalLM.from_pretrained(models_dir / run.continue_from)
    else:
        model = build_model(run.shape, tokenizer, seed=run.sft.seed)
    examples = make_examples(
        tokenizer, run.sft.formats, recipe.instruction, run.sft.pool_per_task, run.sft.seed, recipe.tasks
    )
    until = spec.step if isinstance(spec, EarlierCheckpoint) else None
    losses = sft_train(
        model, examples, run.sft, tokenizer.pad_token_id, recipe.num_threads, log_every=50, on_step=on_step, until=until
    )
    return set_generation_defaults(model, run.sft.modes, tokenizer), losses


def set_generation_defaults(
    model: Qwen3ForCausalLM, modes: tuple[str, ...], tokenizer: PreTrainedTokenizerBase
) -> Qwen3ForCausalLM:
    """Stop and pad tokens of the model's first mode in its generation config (what `generate` uses)."""
    model.generation_config.eos_token_id = stop_token_ids(modes[0], tokenizer)
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
    for task in recipe.tasks:
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
    result["avg"] = sum(result[t] for t in recipe.tasks) / len(recipe.tasks)
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


def loss_curve(losses: list[float], window: int = LOSS_WINDOW) -> list[float]:
    """Mean SFT loss of each consecutive `window` steps (a machine-independent summary of a run)."""
    return [round(sum(part) / len(part), 4) for part in (losses[i : i + window] for i in range(0, len(losses), window))]


def build_run(recipe: Recipe, run: str, target: Path) -> dict[str, dict]:
    """Train SFT run `run` into target/models/, saving its earlier checkpoints on the way; measure
    every model it makes. Returns their world.json entries by label."""
    torch.set_num_threads(recipe.num_threads)
    tokenizer = AutoTokenizer.from_pretrained(target / "tokenizer")
    labels = recipe.runs()[run]
    at_step = {recipe.models[label].step: label for label in labels if label != run}

    def save_checkpoint(step: int, model: Qwen3ForCausalLM) -> None:
        if step in at_step:
            set_generation_defaults(model, recipe.modes(run), tokenizer).save_pretrained(
                target / "models" / at_step[step]
            )

    print(f"[tiny world] training {run} ({recipe.models[run].sft.steps} steps; makes {', '.join(labels)})", flush=True)
    start = time.perf_counter()
    model, losses = train_label(recipe, run, tokenizer, on_step=save_checkpoint, models_dir=target / "models")
    seconds = time.perf_counter() - start
    model.save_pretrained(target / "models" / run)
    entries = {}
    for label in labels:
        trained = Qwen3ForCausalLM.from_pretrained(target / "models" / label)
        accuracy = {mode: heldout_accuracy(trained, tokenizer, mode, recipe) for mode in recipe.modes(label)}
        print(f"[tiny world] {label}: accuracy {json.dumps(accuracy)}", flush=True)
        spec = recipe.models[label]
        entries[label] = {
            "label_hash": label_hash(recipe, label),
            "modes": list(recipe.modes(label)),
            "parameters": sum(p.numel() for p in trained.parameters()),
            "accuracy": accuracy,
            **(
                {"checkpoint_of": run, "step": spec.step}
                if isinstance(spec, EarlierCheckpoint)
                else {"build_seconds": round(seconds, 1), "loss_curve": loss_curve(losses)}
            ),
            **({"continue_from": spec.continue_from} if isinstance(spec, ContinuedRun) else {}),
        }
    return entries


def build_world(recipe: Recipe, full_hash: str, target: Path, root: Path) -> dict:
    """Build every model of `recipe` into `target` (a fresh directory); return world.json's content.

    An SFT run all of whose models' label hashes match ones already built in another world
    under `root` is copied from there (its SFT would give the same bits). The other runs train
    wave by wave (Recipe.waves: a continued run after its base) in `recipe.parallel_builds` worker
    processes, each with `recipe.num_threads` threads (a model's bits depend on its thread count,
    not on which worker trains it).
    """
    build_tokenizer().save_pretrained(target / "tokenizer")
    start = time.perf_counter()
    entries: dict[str, dict] = {}
    runs = recipe.runs()
    for wave in recipe.waves():
        jobs = []
        for run in wave:
            found = {label: find_built_label(root, label_hash(recipe, label)) for label in runs[run]}
            if None in found.values():
                jobs.append((recipe, run, target))
                continue
            for label, (directory, entry) in found.items():
                shutil.copytree(directory, target / "models" / label)
                entries[label] = {**entry, "reused_from": directory.parent.parent.name}
        if recipe.parallel_builds > 1 and len(jobs) > 1:
            with multiprocessing.get_context("spawn").Pool(recipe.parallel_builds) as pool:
                built = pool.starmap(build_run, jobs)
        else:
            built = [build_run(*job) for job in jobs]
        for run_entries in built:
            entries.update(run_entries)
    info = {
        "recipe_hash": full_hash,
        "generator_version": GENERATOR_VERSION,
        "num_threads": recipe.num_threads,
        "parallel_builds": recipe.parallel_builds,
        "build_wall_seconds": round(time.perf_counter() - start, 1),
        "accuracy_method": f"greedy, first {recipe.eval_questions_per_task} eval questions per task",
        "models": {label: entries[label] for label in recipe.models},
        WORLD_FILES: world_files(target),  # what a run checks the files against (require_world_bytes)
    }
    (target / "world.json").write_text(json.dumps(info, indent=2) + "\n")
    return info


def ensure_tiny_world(
    recipe_path: Path = Path("experiments/tiny_world.yaml"),
    root: Path = WORLD_ROOT,
    rebuild: bool = False,
) -> TinyWorld:
    """The tiny world of `recipe_path`, built under `root/<hash12>/` unless it is there already."""
    recipe, full_hash = load_recipe(recipe_path)
    final = world_directory(full_hash, root)
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

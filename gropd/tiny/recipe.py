"""The tiny world's recipe (experiments/tiny_world.yaml) as typed data: each model's shape and SFT settings, the
hashes that name a world and each of its models, read without torch or transformers (a run's identity needs the
hashes, not the models: gropd/model/checkpoints.py). Building it is gropd/tiny/world.py's.

The hash covers the parsed recipe and GENERATOR_VERSION (bump it whenever the tokenizer, tasks, templates or SFT
code change what gets built). A recipe may name its `tasks` (default: tiny_tasks.TASKS, world 4's six); a recipe
that names them also hashes LONG_TASKS_VERSION, and a model's label hash covers them only then, so world 4's
hashes are those it was built with.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path

from eval import tiny_tasks
from eval.tiny_tasks import STYLES, TASKS, check_task
from fileio import file_sha256, files_under, load_yaml
from gropd.templates import check_mode

GENERATOR_VERSION = f"world3-tasks{tiny_tasks.VERSION}"
LONG_TASKS_VERSION = 1  # bump when tiny_tasks' chain task changes what it generates
LABELS = ("B1.7", "B4", "B32", "I1.7", "I4", "I32", "B4pre")  # B32: I32's base (not one of the paper's models);
# B4pre: the first of two pretraining runs of a base (world 5's B4 continues it: experiments/tiny_world_long.yaml)


def parse_format(text: str) -> tuple[str, str]:
    """("mode", "style") of a format "mode/style"; ValueError naming the valid ones."""
    mode, _, style = text.partition("/")
    check_mode(mode)
    if style not in STYLES:
        raise ValueError(f"format {text!r}: style must be one of {', '.join(STYLES)} (as in 'think/detailed')")
    return mode, style


@dataclass(frozen=True)
class ModelShape:
    """Qwen3 architecture sizes (head_dim = hidden_size / num_heads; no grouped-query sharing)."""

    hidden_size: int
    num_layers: int
    num_heads: int
    intermediate_size: int


@dataclass(frozen=True)
class SFTSettings:
    """One model's SFT: its formats ("mode/style"), data pool, optimiser and schedule."""

    formats: tuple[str, ...]
    steps: int
    batch_size: int
    lr: float
    seed: int
    pool_per_task: int = 2000
    warmup_steps: int = 20
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.01

    def __post_init__(self) -> None:
        for text in self.formats:
            parse_format(text)

    @property
    def modes(self) -> tuple[str, ...]:
        """The prompt modes of the formats, in order, each once."""
        return tuple(dict.fromkeys(parse_format(text)[0] for text in self.formats))


@dataclass(frozen=True)
class ModelRecipe:
    """How one labelled model is made: its architecture and its SFT."""

    shape: ModelShape
    sft: SFTSettings


@dataclass(frozen=True)
class ContinuedRun:
    """A model that is label `continue_from`'s weights trained further by `sft` (post-training)."""

    continue_from: str
    sft: SFTSettings


@dataclass(frozen=True)
class EarlierCheckpoint:
    """A model that is label `checkpoint_of`'s SFT run after `step` of its steps (same schedule)."""

    checkpoint_of: str
    step: int


@dataclass(frozen=True)
class Recipe:
    """The whole tiny world: shared settings and one ModelRecipe or EarlierCheckpoint per label."""

    instruction: str
    num_threads: int
    parallel_builds: int
    eval_questions_per_task: int
    eval_max_new_tokens: int
    eval_batch_size: int
    models: dict[str, ModelRecipe | ContinuedRun | EarlierCheckpoint]
    tasks: tuple[str, ...] = TASKS  # the tasks its models are trained and measured on

    def run_of(self, label: str) -> str:
        """The label whose SFT run makes `label` (itself, or the run it is a checkpoint of)."""
        spec = self.models[label]
        return spec.checkpoint_of if isinstance(spec, EarlierCheckpoint) else label

    def modes(self, label: str) -> tuple[str, ...]:
        """The modes model `label` was trained in (those of its run)."""
        return self.models[self.run_of(label)].sft.modes

    def runs(self) -> dict[str, list[str]]:
        """Each SFT run (by its own label, in recipe order) → the labels it makes: its checkpoints, then itself."""
        made = {label: [] for label, spec in self.models.items() if not isinstance(spec, EarlierCheckpoint)}
        for label, spec in self.models.items():
            if isinstance(spec, EarlierCheckpoint):
                made[spec.checkpoint_of].append(label)
        return {run: labels + [run] for run, labels in made.items()}

    def waves(self) -> list[list[str]]:
        """The runs in build order: a run from random weights first, a continued run in the wave after
        the run that makes its base."""
        depth: dict[str, int] = {}

        def of(run: str) -> int:
            spec = self.models[run]
            if run not in depth:
                depth[run] = 0 if isinstance(spec, ModelRecipe) else 1 + of(self.run_of(spec.continue_from))
            return depth[run]

        runs = list(self.runs())
        return [[run for run in runs if of(run) == k] for k in range(1 + max(map(of, runs)))]


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
    except (TypeError, ValueError) as err:  # a missing key; a check of the dataclass (SFTSettings' formats)
        raise ValueError(f"{where}: {err}") from err


def parse_recipe(data: dict, source: str) -> Recipe:
    """A typed Recipe from the recipe YAML's parsed content (`source` names the file in errors)."""
    top = {"instruction", "num_threads", "parallel_builds", "eval", "models"}
    if not isinstance(data, dict) or not top <= set(data) <= top | {"tasks"}:
        raise ValueError(f"{source}: expected exactly the top-level keys {sorted(top)} (and optionally 'tasks')")
    tasks = tuple(data.get("tasks", TASKS))
    try:
        if not tasks:
            raise ValueError("an empty list")
        for task in tasks:
            check_task(task)
    except ValueError as err:
        raise ValueError(f"{source}: tasks: {err}") from err
    ev = data["eval"]
    if not isinstance(ev, dict) or set(ev) != {"questions_per_task", "max_new_tokens", "batch_size"}:
        raise ValueError(f"{source}: key 'eval' needs questions_per_task, max_new_tokens, batch_size")
    models: dict[str, ModelRecipe | ContinuedRun | EarlierCheckpoint] = {}
    for label, spec in data["models"].items():
        where = f"{source}: models.{label}"
        if label not in LABELS:
            raise ValueError(f"{where}: unknown label; valid labels: {', '.join(LABELS)}")
        keys = set(spec) if isinstance(spec, dict) else set()
        if keys == {"checkpoint_of", "step"}:
            models[label] = _typed(EarlierCheckpoint, spec, where)
        elif keys == {"shape", "sft"}:
            shape = _typed(ModelShape, spec["shape"], f"{where}.shape")
            models[label] = ModelRecipe(shape, _typed(SFTSettings, spec["sft"], f"{where}.sft"))
        elif keys == {"continue_from", "sft"}:
            models[label] = ContinuedRun(str(spec["continue_from"]), _typed(SFTSettings, spec["sft"], f"{where}.sft"))
        else:
            raise ValueError(
                f"{where}: expected exactly the keys ['sft', 'shape'], ['continue_from', 'sft'] "
                "or ['checkpoint_of', 'step']"
            )
    for label, spec in models.items():
        if isinstance(spec, EarlierCheckpoint):
            _check_checkpoint(label, spec, models, source)
        if isinstance(spec, ContinuedRun) and spec.continue_from not in models:
            raise ValueError(
                f"{source}: models.{label}.continue_from: {spec.continue_from!r} is not a model of the recipe; "
                f"expected one of {sorted(set(models) - {label})}"
            )
    return Recipe(
        instruction=str(data["instruction"]),
        num_threads=int(data["num_threads"]),
        parallel_builds=int(data["parallel_builds"]),
        eval_questions_per_task=int(ev["questions_per_task"]),
        eval_max_new_tokens=int(ev["max_new_tokens"]),
        eval_batch_size=int(ev["batch_size"]),
        models=models,
        tasks=tasks,
    )


def _check_checkpoint(
    label: str, spec: EarlierCheckpoint, models: dict[str, ModelRecipe | ContinuedRun | EarlierCheckpoint], source: str
) -> None:
    """`checkpoint_of` names a label with its own SFT run, and `step` lies inside that run."""
    runs = sorted(name for name, other in models.items() if not isinstance(other, EarlierCheckpoint))
    parent = models.get(spec.checkpoint_of)
    if parent is None or isinstance(parent, EarlierCheckpoint):
        raise ValueError(
            f"{source}: models.{label}.checkpoint_of: {spec.checkpoint_of!r} is not a model with its own "
            f"sft run; expected one of {runs}"
        )
    if not 1 <= spec.step < parent.sft.steps:
        raise ValueError(
            f"{source}: models.{label}.step: {spec.step} must lie in [1, {parent.sft.steps - 1}] "
            f"(the steps of {spec.checkpoint_of}'s run, before its last)"
        )


def recipe_hash(data: dict) -> str:
    """sha256 over GENERATOR_VERSION and the recipe's canonical JSON (comments and key order don't count)."""
    versions = {"generator": GENERATOR_VERSION, **({"long_tasks": LONG_TASKS_VERSION} if "tasks" in data else {})}
    canonical = json.dumps({**versions, "recipe": data}, sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()


def label_hash(recipe: Recipe, label: str) -> str:
    """sha256 of everything that decides model `label`'s weights and measured accuracy."""
    spec = recipe.models[label]
    if isinstance(spec, EarlierCheckpoint):
        content = {"checkpoint_of": label_hash(recipe, spec.checkpoint_of), "step": spec.step}
        return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()
    content = {
        "generator": GENERATOR_VERSION,
        "instruction": recipe.instruction,
        "num_threads": recipe.num_threads,
        "eval": [recipe.eval_questions_per_task, recipe.eval_max_new_tokens, recipe.eval_batch_size],
        "sft": asdict(spec.sft),
        **(
            {"shape": asdict(spec.shape)}
            if isinstance(spec, ModelRecipe)
            else {"continue_from": label_hash(recipe, spec.continue_from)}
        ),
        **({"tasks": list(recipe.tasks), "long_tasks": LONG_TASKS_VERSION} if recipe.tasks != TASKS else {}),
    }
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()


WORLD_ROOT = Path("results/tiny/world")  # where the tiny worlds are built, one folder a recipe


def world_directory(full_hash: str, root: Path = WORLD_ROOT) -> Path:
    """The folder of the tiny world whose recipe hashes to `full_hash`: <root>/<its first 12 digits>."""
    return Path(root) / full_hash[:12]


def load_recipe(path: Path) -> tuple[Recipe, str]:
    """The typed recipe at `path` and its full hash."""
    data = load_yaml(Path(path).read_text())
    return parse_recipe(data, str(path)), recipe_hash(data)


WORLD_FILES = "files"  # world.json's {path under the world's folder: sha256} of every file it was built with


def world_files(directory: Path) -> dict[str, str]:
    """WORLD_FILES of a tiny world's folder: the sha256 of its every file (world.json itself and hidden files left
    out), by its path under `directory` (models/<label>/model.safetensors, tokenizer/tokenizer.json, ...); a run
    checks its models' files against them (gropd/model/checkpoints.py: require_world_bytes)."""
    return {name: file_sha256(directory / name) for name in files_under(directory) if name != "world.json"}

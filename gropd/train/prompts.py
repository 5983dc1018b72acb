"""The training prompt pool and a resumable sampler over it (a fresh seeded shuffle each epoch)."""

from __future__ import annotations

import random
from typing import Any

from eval.suites import Question
from gropd.config.lock import dataset_revision, read_lock
from gropd.config.manifests import Manifests


def load_prompt_pool(source: dict[str, Any], profile: str, manifests: Manifests) -> list[Question]:
    """The training questions: the tiny world's pool (`per_task` questions of each of `tasks`,
    default all, from `seed`; disjoint from every eval question), or a Hub source (suites.yaml's record
    form) at the revision experiments/lock.yaml pins for it (required in the paper profile: `pin`)."""
    if source.get("kind") == "tiny":
        from eval.tiny_tasks import TASKS, train_questions

        per_task, seed = source.get("per_task", 1000), source.get("seed", 0)
        chosen = source.get("tasks") or list(TASKS)
        return [Question(**row) for task in chosen for row in train_questions(task, per_task, seed)]
    from eval.suites import SuiteSpec, load_questions

    spec = SuiteSpec(name=f"{profile}-train-prompts", title="training prompts", k=1, version=1, source=source)
    lock_path = manifests.root / "lock.yaml"
    revision = dataset_revision(
        read_lock(lock_path), spec.source.repo, spec.source.revision, lock_path, profile == "paper"
    )
    return load_questions(spec, revision=revision)


class PromptSampler:
    """Draws prompts without replacement; state (epoch, position) is saved in checkpoints."""

    def __init__(self, pool: list[Question], seed: int):
        if not pool:
            raise ValueError("the training prompt pool is empty")
        self.pool, self.seed, self.epoch, self.position = pool, seed, 0, 0
        self._order = self._shuffle()

    def _shuffle(self) -> list[int]:
        order = list(range(len(self.pool)))
        random.Random(self.seed * 1_000_003 + self.epoch).shuffle(order)
        return order

    def next(self, count: int) -> list[Question]:
        chosen = []
        for _ in range(count):
            if self.position == len(self._order):
                self.epoch, self.position = self.epoch + 1, 0
                self._order = self._shuffle()
            chosen.append(self.pool[self._order[self.position]])
            self.position += 1
        return chosen

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "position": self.position}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.epoch, self.position = state["epoch"], state["position"]
        self._order = self._shuffle()

"""experiments/lock.yaml: the paper's short commit ids resolved to the full ids runs download at.

`pin` asks the Hub once (`./reproduce.sh pin`); runs of the paper profile then refuse to
start while any model they use is unpinned, or pinned to an id that does not extend the
manifest's short revision.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from eval.files import atomic_write_text
from gropd.config.errors import ConfigError
from gropd.config.manifests import Manifests

Resolver = Callable[[str, str, str], str]  # (repo_type, repo, short revision) -> full 40-hex commit id


def hub_resolver(repo_type: str, repo: str, revision: str) -> str:
    """The full commit id the Hub gives for `revision` of `repo` (needs network)."""
    from huggingface_hub import HfApi

    info = (HfApi().model_info if repo_type == "model" else HfApi().dataset_info)(repo, revision=revision)
    return str(info.sha)


def pin(manifests: Manifests, profile: str, lock_path: Path, resolver: Resolver = hub_resolver) -> dict[str, Any]:
    """Resolve every hub model, suite and training-prompt source of `profile` (its suites in suites.yaml,
    its prompts in profiles/<profile>.yaml), write lock_path atomically, return the lock."""
    lock: dict[str, Any] = {"models": {}, "datasets": {}}
    for label, record in manifests.models.get(profile, {}).items():
        source = record["source"]
        if source.get("kind") == "hub":
            full = resolver("model", source["repo"], str(source["revision"]))
            _check_extends(
                full, str(source["revision"]), str(manifests.root / "models.yaml"), f"{profile}.{label}.source.revision"
            )
            lock["models"][source["repo"]] = {"short": str(source["revision"]), "full": full}
    sources = [record.get("source") or {} for record in manifests.suites.get(profile, {}).values()]
    sources.append(profile_prompt_source(manifests, profile))
    for source in sources:
        if source.get("kind") == "hub":
            full = resolver("dataset", source["repo"], str(source.get("revision", "main")))
            lock["datasets"][source["repo"]] = {"requested": str(source.get("revision", "main")), "full": full}
    atomic_write_text(lock_path, yaml.safe_dump(lock, sort_keys=True))
    return lock


def profile_prompt_source(manifests: Manifests, profile: str) -> dict[str, Any]:
    """The training-prompt source `train.prompts.source` of profiles/<profile>.yaml ({} when it sets none)."""
    from gropd.config.layering import read_yaml

    data = read_yaml(manifests.root / "profiles" / f"{profile}.yaml")
    return ((data.get("train") or {}).get("prompts") or {}).get("source") or {}


def dataset_revision(lock: dict[str, Any], repo: str, requested: str, lock_path: Path, required: bool) -> str | None:
    """The full revision the lock holds for dataset `repo`; without one, a ConfigError telling to run
    `pin` when `required` (the paper profile), else None (load at the requested revision). A lock made for
    another requested revision than the manifest's is refused too."""
    entry = (lock.get("datasets") or {}).get(repo)
    if entry is None:
        if required:
            raise ConfigError(
                str(lock_path), f"datasets.{repo}", "not pinned", "a full revision: run `./reproduce.sh pin` first"
            )
        return None
    if str(entry.get("requested")) != str(requested):
        raise ConfigError(
            str(lock_path),
            f"datasets.{repo}.requested",
            f"pinned for {entry.get('requested')!r} but the manifest asks for {requested!r}",
            "a lock made from the current manifests: run `./reproduce.sh pin` again",
        )
    return str(entry["full"])


def _check_extends(full: str, short: str, file: str, key: str) -> None:
    if len(full) != 40 or not full.startswith(short):
        raise ConfigError(
            file,
            key,
            f"the Hub resolved {short!r} to {full!r}",
            "a 40-hex commit id starting with the short id",
        )


def read_lock(lock_path: Path) -> dict[str, Any]:
    if not lock_path.exists():
        return {"models": {}, "datasets": {}}
    return yaml.safe_load(lock_path.read_text()) or {"models": {}, "datasets": {}}


def pinned_revision(lock: dict[str, Any], repo: str, short: str, lock_path: Path) -> str:
    """The full id for (repo, short) from the lock, or a ConfigError telling to run `pin`."""
    entry = (lock.get("models") or {}).get(repo)
    if entry is None:
        raise ConfigError(
            str(lock_path), f"models.{repo}", "not pinned", "a full revision: run `./reproduce.sh pin` first"
        )
    if entry.get("short") != short:
        raise ConfigError(
            str(lock_path),
            f"models.{repo}.short",
            f"pinned for {entry.get('short')!r} but models.yaml asks for {short!r}",
            "a lock made from the current models.yaml: run `./reproduce.sh pin` again",
        )
    _check_extends(str(entry.get("full")), short, str(lock_path), f"models.{repo}.full")
    return str(entry["full"])

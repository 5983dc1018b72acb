"""experiments/lock.yaml: the paper's short commit ids resolved to the full ids runs download at.

`pin --profile P` asks the Hub once (`./reproduce.sh pin`) for P's models and datasets and rewrites
only their entries: the pins of repos P does not use stay. Runs of the paper profile then refuse to
start while any model they use is unpinned, or pinned to an id that does not extend the manifest's
short revision. Offline (HF_HUB_OFFLINE=1) the full ids come from the local Hub cache instead.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from fileio import atomic_write_text
from gropd.config.errors import ConfigError
from gropd.config.layering import read_yaml
from gropd.config.manifests import Manifests

Resolver = Callable[[str, str, str], str]  # (repo_type, repo, short revision) -> full 40-hex commit id


def hub_resolver(repo_type: str, repo: str, revision: str) -> str:
    """The full commit id the Hub gives for `revision` of `repo`; offline (HF_HUB_OFFLINE), the one of the
    local cache. Any failure is one ConfigError naming the host (or cache) and the way to pin offline."""
    from huggingface_hub import HfApi, constants
    from huggingface_hub.errors import HfHubHTTPError, HTTPError

    if constants.is_offline_mode():
        return cached_revision(Path(constants.HF_HUB_CACHE), repo_type, repo, revision)
    api = HfApi()
    try:
        return str((api.model_info if repo_type == "model" else api.dataset_info)(repo, revision=revision).sha)
    except HfHubHTTPError as err:  # the Hub answered: no such repo or revision, gated, ...
        problem = f"the Hub refused {repo_type} {repo} at {revision!r}: {type(err).__name__}"
        raise ConfigError(constants.ENDPOINT, f"{repo}@{revision}", problem, "a repo and revision that exist") from None
    except (HTTPError, OSError) as err:  # no answer: no network, DNS, proxy, timeout
        raise ConfigError(
            constants.ENDPOINT,
            f"{repo}@{revision}",
            f"cannot reach the Hub ({type(err).__name__}: {err})",
            f"network access to {constants.ENDPOINT}, or pin offline: HF_HUB_OFFLINE=1 with the repos in the "
            f"local cache ({constants.HF_HUB_CACHE}, or HF_HUB_CACHE=DIR; filled where there is network by "
            "`hf download REPO --revision REV`)",
        ) from None


def cached_revision(cache_dir: Path, repo_type: str, repo: str, revision: str) -> str:
    """The full commit id of `repo` in a Hub cache whose id starts with `revision`, or that `revision` (a
    branch, e.g. main) names there."""
    from huggingface_hub import scan_cache_dir
    from huggingface_hub.errors import CacheNotFound

    try:
        repos = scan_cache_dir(cache_dir).repos
    except CacheNotFound:
        repos = frozenset()
    for cached in repos:
        if (cached.repo_id, cached.repo_type) == (repo, repo_type):
            for cached_revision in cached.revisions:
                if cached_revision.commit_hash.startswith(revision) or revision in cached_revision.refs:
                    return cached_revision.commit_hash
    raise ConfigError(
        str(cache_dir),
        f"{repo}@{revision}",
        f"HF_HUB_OFFLINE is set and the local Hub cache has no {repo_type} {repo} at {revision!r}",
        f"the repo in the cache (`hf download {repo}{' --repo-type dataset' if repo_type == 'dataset' else ''} "
        f"--revision {revision}` where there is network, then copy the cache), or unset HF_HUB_OFFLINE",
    )


def hub_sources(manifests: Manifests, profile: str) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    """The Hub sources of `profile`: its models (label -> source, models.yaml), its suites' and training
    prompts' datasets (suites.yaml, profiles/<profile>.yaml)."""
    models = {label: record["source"] for label, record in manifests.models.get(profile, {}).items()}
    sources = [record.get("source") or {} for record in manifests.suites.get(profile, {}).values()]
    sources.append(profile_prompt_source(manifests, profile))
    hub = {label: source for label, source in models.items() if source.get("kind") == "hub"}
    return hub, [source for source in sources if source.get("kind") == "hub"]


def pin(manifests: Manifests, profile: str, lock_path: Path, resolver: Resolver = hub_resolver) -> dict[str, Any]:
    """Resolve every Hub model and dataset of `profile` (hub_sources), then rewrite lock_path atomically
    with their entries, keeping every other entry; returns the lock. A profile with nothing on the Hub is
    refused, and so is a failed resolution: the lock is then left as it was."""
    manifests.require_profile(profile)
    models, datasets = hub_sources(manifests, profile)
    if not models and not datasets:
        pinnable = [name for name in manifests.profiles if any(hub_sources(manifests, name))]
        raise ConfigError(
            "command line",
            "--profile",
            f"{profile!r} has no model or dataset on the Hub: nothing to pin",
            f"a profile with Hub revisions: {', '.join(pinnable) or 'none'}",
        )
    lock = read_lock(lock_path)
    for label, source in models.items():
        short = str(source["revision"])
        full = resolver("model", source["repo"], short)
        _check_extends(full, short, str(manifests.root / "models.yaml"), f"{profile}.{label}.source.revision")
        lock["models"][source["repo"]] = {"short": short, "full": full}
    for source in datasets:
        repo, requested = source["repo"], str(source.get("revision", "main"))
        lock["datasets"][repo] = {"requested": requested, "full": resolver("dataset", repo, requested)}
    atomic_write_text(lock_path, yaml.safe_dump(lock, sort_keys=True))
    return lock


def profile_prompt_source(manifests: Manifests, profile: str) -> dict[str, Any]:
    """The training-prompt source `train.prompts.source` of profiles/<profile>.yaml ({} when it sets none)."""
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
            file, key, f"the Hub resolved {short!r} to {full!r}", "a 40-hex commit id starting with the short id"
        )


def read_lock(lock_path: Path) -> dict[str, Any]:
    """The lock ({"models": {repo: ...}, "datasets": {repo: ...}}; empty when absent); ConfigError naming
    the file when it is not that."""
    lock = read_yaml(lock_path) if lock_path.exists() else {}
    for section in ("models", "datasets"):
        lock[section] = {} if lock.get(section) is None else lock[section]
        if not isinstance(lock[section], dict):
            raise ConfigError(str(lock_path), section, f"is {type(lock[section]).__name__}", "a mapping repo -> pin")
    return lock


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

"""Resolve one run: layer train.yaml <- profile <- its pairing's per-profile `config` (pairings.yaml)
<- grid entry <- run file <- overrides, validate, hash.

`resolve_run` is the only way a run's configuration is made; its result is what a run
saves beside its outputs (config.yaml) together with `config_hash`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from gropd.config.errors import ConfigError
from gropd.config.layering import Origins, merge, origin_of, parse_overrides, read_yaml
from gropd.config.manifests import Manifests
from gropd.config.schema import RunConfig
from gropd.credit import METHODS, method


def resolve_run(
    run_file: Path | None,
    profile: str,
    manifests: Manifests,
    overrides: list[str] | None = None,
    entry_values: dict[str, Any] | None = None,
) -> RunConfig:
    """The run's resolved config (resolve_run_traced without the origins)."""
    return resolve_run_traced(run_file, profile, manifests, overrides, entry_values)[0]


def resolve_run_traced(
    run_file: Path | None,
    profile: str,
    manifests: Manifests,
    overrides: list[str] | None = None,
    entry_values: dict[str, Any] | None = None,
) -> tuple[RunConfig, Origins]:
    """The run's resolved config and where each of its set keys came from (dotted key -> the layer: a file's
    path, `<pairings.yaml>: <pairing>.config.<profile>`, or "command line"); ConfigError naming the file and key
    path on any bad input. A run file's `run_id` must be its file name; a key nobody set is blamed on the run
    file (or grid, or command line)."""
    root = manifests.root
    manifests.require_profile(profile)
    layers = [(read_yaml(root / "train.yaml"), str(root / "train.yaml"))]
    layers.append((read_yaml(root / "profiles" / f"{profile}.yaml"), str(root / "profiles" / f"{profile}.yaml")))
    run_layers = [] if entry_values is None else [(entry_values, _grid_file(root, entry_values))]
    if run_file is not None:
        run_layers.append((read_yaml(run_file), str(run_file)))
    run_layers.append((parse_overrides(overrides or []), "command line"))
    fallback = run_layers[-2][1] if len(run_layers) > 1 else "command line"
    pairing = _merged(layers + run_layers, {}).get("pairing")
    pairing_defaults = (manifests.pairings.get(pairing) or {}).get("config", {}).get(profile) if pairing else None
    if pairing_defaults:
        layers.append((pairing_defaults, f"{root / 'pairings.yaml'}: {pairing}.config.{profile}"))
    origins: Origins = {}
    values = _merged(layers + run_layers, origins)
    where = lambda key: origin_of(origins, key, fallback)  # noqa: E731
    if values.get("profile") != profile:
        raise ConfigError(where("profile"), "profile", f"{values.get('profile')!r}", repr(profile))
    if run_file is not None and values.get("run_id") != run_file.stem:
        given = "missing" if values.get("run_id") is None else f"{values['run_id']!r}"
        raise ConfigError(where("run_id"), "run_id", given, f"{run_file.stem!r} (the file's name)")
    _check_group_size(values, where)
    try:
        config = RunConfig.model_validate(values)
    except ValidationError as err:
        raise _config_error(err, where) from None
    check_against_manifests(config, manifests, where)
    return config, origins


def _grid_file(root: Path, entry_values: dict[str, Any]) -> str:
    """The grid file a grid entry's values come from."""
    return str(root / "grids" / f"{entry_values['grid']}.yaml") if entry_values.get("grid") else "grid entry"


def _check_group_size(values: dict[str, Any], where: Callable[[str], str]) -> None:
    """GR-OPD has G >= 2: checked before the schema, so that G = 1 gets this message whatever the
    minibatch arithmetic of TrainSettings says."""
    train = values.get("train")
    group_size = train.get("group_size") if isinstance(train, dict) else None
    record = METHODS.get(values.get("method"))
    if record and record.groups and type(group_size) is int and group_size < 2:
        raise ConfigError(
            where("train.group_size"),
            "train.group_size",
            f"G = {group_size}",
            "G >= 2 for GR-OPD (group statistics need at least two responses)",
        )


def _merged(layers: list[tuple[dict[str, Any], str]], origins: Origins) -> dict[str, Any]:
    """The layers merged, later wins; `origins` gets each leaf's layer."""
    values: dict[str, Any] = {}
    for layer, source in layers:
        merge(values, layer, source, origins)
    return values


def _config_error(err: ValidationError, where: Callable[[str], str]) -> ConfigError:
    first = err.errors()[0]
    key = ".".join(str(part) for part in first["loc"])
    if first["type"] == "extra_forbidden":
        parent = _model_at(RunConfig, first["loc"][:-1])
        valid = ", ".join(parent.model_fields) if parent else "a known key"
        return ConfigError(where(key), key, "unknown key", f"one of {valid}")
    if first["type"] == "missing":
        return ConfigError(where(key.rsplit(".", 1)[0]), key, "missing", "a value")
    given = first.get("input")
    shown = "" if isinstance(given, (dict, list)) else f" (got {given!r})"  # a section's check names its keys
    return ConfigError(where(key), key, f"{first['msg'].removeprefix('Value error, ')}{shown}")


def _model_at(model: type[BaseModel], loc: tuple[Any, ...]) -> type[BaseModel] | None:
    for part in loc:
        field = model.model_fields.get(str(part))
        annotation = getattr(field, "annotation", None)
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return None
        model = annotation
    return model


def check_against_manifests(config: RunConfig, manifests: Manifests, where: Callable[[str], str]) -> None:
    """Cross-file checks: the pairing, model, mode and suites exist; fullkl has a transformers teacher
    (`where(key)`: the file that set it)."""
    profile_models = manifests.models.get(config.profile, {})
    profile_suites = manifests.suites.get(config.profile, {})
    if config.kind in ("train", "score"):
        for key in ("pairing", "method") if config.kind == "train" else ("pairing",):
            if getattr(config, key) is None:
                raise ConfigError(where(key), key, f"missing for a {config.kind} run", "a value")
        if config.kind == "score" and config.method is not None:
            raise ConfigError(where("method"), "method", f"{config.method!r}", "no method: a score run updates nothing")
        if config.pairing not in manifests.pairings:
            raise ConfigError(
                where("pairing"),
                "pairing",
                f"{config.pairing!r} does not exist",
                f"one of {', '.join(manifests.pairings)}",
            )
        if missing := manifests.missing_pairing_models(config.profile, config.pairing):
            runnable = [
                name for name in manifests.pairings if not manifests.missing_pairing_models(config.profile, name)
            ]
            raise ConfigError(
                where("pairing"),
                "pairing",
                f"{config.pairing!r} names {', '.join(missing)}, not a model of profile {config.profile!r}",
                f"a pairing of its models: one of {', '.join(runnable)}",
            )
        if config.method is not None and method(config.method).needs_distribution and config.backend.teacher != "hf":
            raise ConfigError(
                where("backend.teacher"),
                "backend.teacher",
                f"{config.backend.teacher!r} with method {config.method}",
                "hf: the exact KL needs the teacher's whole distribution at every response position; vLLM returns "
                "only top-k log-probs, and a top-k approximation is not implemented (not shown to be right)",
            )
    else:
        if config.model not in profile_models:
            raise ConfigError(
                where("model"),
                "model",
                f"{config.model!r} is not a model of profile {config.profile!r}",
                f"one of {', '.join(profile_models)}",
            )
        if config.mode not in profile_models[config.model]["modes"]:
            raise ConfigError(
                where("mode"),
                "mode",
                f"{config.mode!r} is not a mode of {config.model}",
                f"one of {', '.join(profile_models[config.model]['modes'])}",
            )
    for key, names in (("eval.suites", config.eval.suites or []), ("eval.k", list(config.eval.k))):
        for name in names:
            if name not in profile_suites:
                raise ConfigError(
                    where(key),
                    key,
                    f"suite {name!r} does not exist in profile {config.profile!r}",
                    f"one of {', '.join(profile_suites)}",
                )


NOT_HASHED = ("tracking", "backend.teacher_url")  # config keys (dotted) that do not change a run's results
HASHED_WHEN_SET = {"train.tis_cap": None, "train.dynamic_batch": False, "train.balance_ranks": False}  # keys added
# after runs were recorded (issue 64): at these values, their defaults, left out of the hash, so every recorded run's
# hash (its config.yaml lacks them) still holds; set otherwise, hashed like any key


def config_hash(config: RunConfig) -> str:
    """sha256 of the canonical JSON of the resolved config (first 16 hex digits), NOT_HASHED keys left
    out (data_hash): where curves are sent, or at which address the teacher server answers, does not
    change a run's results, so a tracker switched on or a server moved keeps runs finished."""
    return data_hash(config.model_dump(mode="json"))


def data_hash(data: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of a config mapping without its NOT_HASHED keys, nor its HASHED_WHEN_SET keys
    at their defaults (first 16 hex digits); of a saved config.yaml's contents it equals the config_hash of the
    config that wrote it."""
    identity = _without(data, NOT_HASHED)
    identity = _without(identity, tuple(k for k, v in HASHED_WHEN_SET.items() if _at(identity, k, v) == v))
    canonical = json.dumps(identity, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def config_yaml(config: RunConfig) -> str:
    """The resolved config as YAML, as saved beside a run's results."""
    return yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False)


def _at(data: dict[str, Any], dotted: str, missing: Any) -> Any:
    """The value at a dotted path of nested mappings, `missing` where there is none."""
    for part in dotted.split("."):
        if not isinstance(data, dict) or part not in data:
            return missing
        data = data[part]
    return data


def _without(data: dict[str, Any], dotted: tuple[str, ...]) -> dict[str, Any]:
    """A copy of `data` without the keys at the dotted paths."""
    out = dict(data)
    for path in dotted:
        head, _, rest = path.partition(".")
        if head in out and rest and isinstance(out[head], dict):
            out[head] = _without(out[head], (rest,))
        elif not rest:
            out.pop(head, None)
    return out

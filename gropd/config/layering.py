"""Deep merge of config layers with per-key provenance, and `key.path=value` overrides.

Layers (later wins): train.yaml <- profile <- grid entry / per-run YAML <- command line.
Every leaf remembers which layer last set it, so a validation error can name the file.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from fileio import load_yaml
from gropd.config.errors import ConfigError

Origins = dict[str, str]


def read_yaml(path: Path) -> dict[str, Any]:
    """Read a YAML mapping; an empty file is {}; anything else is a ConfigError naming the file."""
    try:
        data = load_yaml(path.read_text())
    except FileNotFoundError:
        raise ConfigError(str(path), "", "file not found") from None
    except OSError as err:  # a directory, a file without read permission, ...
        raise ConfigError(str(path), "", f"cannot be read ({err.strerror})", "a YAML file") from None
    except UnicodeDecodeError as err:
        raise ConfigError(str(path), "", f"not UTF-8 text ({err.reason} at byte {err.start})") from None
    except yaml.YAMLError as err:
        raise ConfigError(str(path), "", f"not valid YAML: {err}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(str(path), "", f"top level is {type(data).__name__}", "a mapping")
    return data


def dotted_to_nested(flat: dict[str, Any]) -> dict[str, Any]:
    """{"gropd.lam": 0.2, "method": "x"} -> {"gropd": {"lam": 0.2}, "method": "x"}."""
    nested: dict[str, Any] = {}
    for key, value in flat.items():
        node = nested
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = copy.deepcopy(value)
    return nested


def nested_to_dotted(nested: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"gropd": {"lam": 0.2}, "method": "x"} -> {"gropd.lam": 0.2, "method": "x"} (an empty mapping: no key)."""
    flat: dict[str, Any] = {}
    for key, value in nested.items():
        if isinstance(value, dict):
            flat.update(nested_to_dotted(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def merge(base: dict[str, Any], layer: dict[str, Any], source: str, origins: Origins, prefix: str = "") -> None:
    """Merge `layer` into `base` in place (mappings recursively, anything else replaced)."""
    for key, value in dotted_to_nested(layer).items():
        path = f"{prefix}{key}"
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            merge(base[key], value, source, origins, prefix=f"{path}.")
            continue
        emptied = emptied_by(base, key, value, origins.get(path))
        base[key] = copy.deepcopy(value)
        for origin_key in [k for k in origins if k == path or k.startswith(path + ".")]:
            del origins[origin_key]
        for leaf in leaf_paths(value, path):
            origins[leaf] = source
        if emptied:  # what the section lacks now is that layer's doing (origin_of reads the nearest ancestor)
            origins[path] = emptied


def emptied_by(base: dict[str, Any], key: str, value: Any, origin: str | None) -> str | None:
    """The layer (`origin`) that set section `key` to null, when a later layer now gives keys of it (`value`, a
    mapping): a run file's `train: null` under `train.steps=0` dropped every other train key, so a key missing
    there is the run file's doing, not the command line's. None otherwise."""
    return origin if isinstance(value, dict) and key in base and base[key] is None else None


def leaf_paths(value: Any, path: str) -> list[str]:
    """Every leaf key path under `value` (a non-mapping is its own leaf)."""
    if isinstance(value, dict) and value:
        return [leaf for k, v in value.items() for leaf in leaf_paths(v, f"{path}.{k}")]
    return [path]


MAX_KEY_DEPTH = 16  # RunConfig's deepest key (eval.sampling.think.max_new_tokens) is 4 levels


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """["train.steps=5", "gropd.lam=0.25"] -> flat {"train.steps": 5, "gropd.lam": 0.25}; values parse as YAML
    (fileio.load_yaml); a later item wins (the command line's own items: gropd.runs.plan.check_overrides)."""
    flat: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key or any(not part for part in key.split(".")):
            raise ConfigError("command line", item, "not an override", "key.path=value")
        if (depth := key.count(".") + 1) > MAX_KEY_DEPTH:  # (nesting it, and the reports' walks, would recurse)
            shown = f"{key[:40]}... ({len(key):,} characters)"
            raise ConfigError("command line", shown, f"a key {depth:,} levels deep", f"at most {MAX_KEY_DEPTH} levels")
        try:
            flat[key] = load_yaml(raw) if raw != "" else ""
        except yaml.YAMLError as err:
            problem = getattr(err, "problem", None) or err
            shown = repr(raw) if len(raw) <= 60 else f"{raw[:30]!r}... ({len(raw):,} characters)"
            raise ConfigError("command line", key, f"value {shown} is not valid YAML ({problem})") from None
    return flat


def origin_of(origins: Origins, key_path: str, fallback: str = "defaults") -> str:
    """The layer that set `key_path` (or its nearest set ancestor/descendant); `fallback` when none did."""
    if key_path in origins:
        return origins[key_path]
    parts = key_path.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        if ".".join(parts[:cut]) in origins:
            return origins[".".join(parts[:cut])]
    below = [src for key, src in origins.items() if key.startswith(key_path + ".")]
    return below[-1] if below else fallback

"""Configuration: manifests, layering, grids, validation and the lock file."""

from gropd.config.errors import ConfigError, RunFileError
from gropd.config.manifests import Manifests, load_manifests
from gropd.config.resolve import config_hash, config_yaml, data_hash, resolve_run
from gropd.config.schema import RunConfig

__all__ = [
    "ConfigError",
    "Manifests",
    "RunConfig",
    "RunFileError",
    "config_hash",
    "config_yaml",
    "data_hash",
    "load_manifests",
    "resolve_run",
]

"""Configuration: manifests, layering, grids, validation and the lock file."""

from gropd.config.errors import ConfigError
from gropd.config.manifests import Manifests, load_manifests
from gropd.config.resolve import config_hash, config_yaml, resolve_run
from gropd.config.schema import RunConfig

__all__ = ["ConfigError", "Manifests", "RunConfig", "config_hash", "config_yaml", "load_manifests", "resolve_run"]

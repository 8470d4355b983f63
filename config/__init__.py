"""Typed, validated per-stage settings: the only input of the app."""

from .errors import ConfigError
from .loader import CONFIG_DIR, load_stage_file, load_stages, stage_files
from .schema import StageConfig

__all__ = ["CONFIG_DIR", "ConfigError", "StageConfig", "load_stage_file", "load_stages", "stage_files"]

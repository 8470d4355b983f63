"""Read a stage file into a validated StageConfig, or raise one ConfigError. Nothing else escapes."""
from __future__ import annotations

from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from . import rules
from .errors import ConfigError, from_validation_error
from .schema import StageConfig

MAX_FILE_BYTES = 256 * 1024
MAX_ALIASES = 64
CONFIG_DIR = Path(__file__).resolve().parent


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses duplicate keys instead of silently keeping the last one."""

    def construct_mapping(self, node, deep=False):  # noqa: ANN001 - PyYAML's signature
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:
                raise yaml.constructor.ConstructorError(
                    None, None, "a mapping key must be a plain value", key_node.start_mark) from None
            if duplicate:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r}", key_node.start_mark)
        return super().construct_mapping(node, deep=deep)


def _read(path: Path) -> str:
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise ConfigError(str(path), "(file)", f"{size} bytes is too large for a stage file "
                                                   f"(allowed: up to {MAX_FILE_BYTES} bytes)")
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(str(path), "(file)", "no such file (a stage file is config/<stage>.yaml)") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(str(path), "(file)", f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise ConfigError(str(path), "(file)", f"cannot be read ({exc.strerror})") from None


def _parse(path: str, text: str) -> object:
    try:
        events = yaml.parse(text, Loader=_StrictLoader)
        aliases = documents = 0
        for event in events:
            aliases += isinstance(event, yaml.AliasEvent)
            documents += isinstance(event, yaml.DocumentStartEvent)
        if aliases > MAX_ALIASES:
            raise ConfigError(path, "(file)", f"{aliases} YAML aliases (allowed: up to {MAX_ALIASES})")
        if documents > 1:
            raise ConfigError(path, "(file)", f"{documents} YAML documents (allowed: exactly one)")
        return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(path, "(file)", f"not valid YAML: {exc.problem or exc.context}{where}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(path, "(file)", f"not valid YAML: {exc}") from None
    except RecursionError:
        raise ConfigError(path, "(file)", "YAML nested too deeply") from None


Model = TypeVar("Model", bound=BaseModel)


def load_model(path: Path, model: type[Model], what: str) -> Model:
    """Read, parse and validate one YAML file against `model`; any problem is one ConfigError."""
    shown = str(path)
    data = _parse(shown, _read(path))
    if data is None:
        raise ConfigError(shown, "(root)", f"the file is empty (expected a mapping of {what} settings)")
    if not isinstance(data, dict):
        raise ConfigError(shown, "(root)", f"expected a mapping of {what} settings, got {type(data).__name__}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise from_validation_error(shown, model, exc) from None
    except (RecursionError, OverflowError, ValueError, TypeError) as exc:
        raise ConfigError(shown, "(root)", f"cannot be read as {what} settings ({type(exc).__name__})") from None


def load_stage_file(path: str | Path) -> StageConfig:
    """Load and check one stage file: the same checks at validate time and at synth time."""
    path = Path(path)
    shown = str(path)
    cfg = load_model(path, StageConfig, "stage")
    if cfg.stage != path.stem:
        raise ConfigError(shown, "stage", f"{cfg.stage!r} differs from the file name "
                                          f"(allowed: {path.stem!r}, the file is <stage>.yaml)")
    rules.check(cfg, shown)
    return cfg


def stage_files(config_dir: str | Path = CONFIG_DIR) -> list[Path]:
    """Every stage file in the folder, in name order (the order stages are synthesized). Files whose
    name starts with `_` (the pipeline's `_pipeline.yaml`) are not stages."""
    return sorted(p for p in Path(config_dir).glob("*.yaml") if not p.name.startswith("_"))


def load_stages(config_dir: str | Path = CONFIG_DIR, only: str | None = None) -> list[StageConfig]:
    """All stages of the folder, or just `only`; every file is checked before any stage is built."""
    files = stage_files(config_dir)
    if only is not None:
        wanted = Path(config_dir) / f"{only}.yaml"
        if wanted not in files:
            names = ", ".join(file.stem for file in files) or "none"
            raise ConfigError(str(wanted), "(file)", f"no stage named {only!r} (allowed: {names})")
        files = [wanted]
    if not files:
        raise ConfigError(str(config_dir), "(folder)", "no stage files (expected <stage>.yaml files)")
    return [load_stage_file(file) for file in files]

"""Read a stage file into a validated StageConfig, or raise one ConfigError. Nothing else escapes."""

from __future__ import annotations

import os
import re
import stat
import sys
import unicodedata
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from . import rules
from .errors import ConfigError, from_validation_error, short
from .schema import StageConfig, is_stage_file_name

MAX_FILE_BYTES = 256 * 1024
MAX_ALIASES = 64
# Bounds far above any legal stage file (5 levels, about 2,000 nodes at most) that stop a hostile one before
# parsing, the model or a message takes noticeable time or memory (alias bombs, deep nesting, huge integers).
# Why: docs/DECISIONS.md, "Stage file checks: where their limits come from".
MAX_DEPTH = 20
MAX_NODES = 20_000
PLAIN_INTEGER = re.compile(r"[-+]?(0|[1-9][0-9]*)")
# .inf and .nan pass here: every float field refuses them by name (config/engine_args.py, the schema's finite checks)
PLAIN_DECIMAL = re.compile(r"[-+]?(([0-9]+\.[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?|\.(inf|Inf|INF))|\.(nan|NaN|NAN)")
MAX_SCALAR_DIGITS = 40  # the longest number a stage file needs is 12 digits; int() of 4,300+ raises
CONFIG_DIR = Path(__file__).resolve().parent


class _Strict(yaml.constructor.SafeConstructor):
    """Safe loading that refuses duplicate keys instead of silently keeping the last one, and numbers too
    long to be settings (Python refuses to convert integers of more than 4,300 digits at all)."""

    def construct_mapping(self, node, deep=False):
        seen = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                duplicate = key in seen
                seen.add(key)
            except TypeError:
                raise yaml.constructor.ConstructorError(
                    None, None, "a mapping key must be a plain value", key_node.start_mark
                ) from None
            if duplicate:
                raise yaml.constructor.ConstructorError(None, None, f"duplicate key {short(key)}", key_node.start_mark)
            if not isinstance(key, str):  # every key of a stage or pipeline file is a name
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"the key {short(key_node.value)} is read as {_yaml_kind(key)}: quote it",
                    key_node.start_mark,
                )
        return super().construct_mapping(node, deep=deep)

    def _plain_number(self, node, syntax: re.Pattern[str], construct):
        """A number as a reader means it: decimal digits. YAML 1.1 (PyYAML) reads 010 as 8, 0x1F as 31, 1:20 as 80
        and 1_000 as 1000: none is what a setting written that way means (.inf and .nan pass, for the fields'
        finite checks to refuse by name)."""
        if len(node.value) > MAX_SCALAR_DIGITS:
            problem = f"a number of {len(node.value)} characters (allowed: up to {MAX_SCALAR_DIGITS})"
            raise yaml.constructor.ConstructorError(None, None, problem, node.start_mark)
        value = construct(self, node)
        if not syntax.fullmatch(node.value):
            problem = (
                f"{short(node.value)} is {value!r} to YAML 1.1, not what it looks like (a number: write it in decimal "
                "digits; text: quote it)"
            )
            raise yaml.constructor.ConstructorError(None, None, problem, node.start_mark)
        return value

    def construct_yaml_int(self, node):
        return self._plain_number(node, PLAIN_INTEGER, yaml.constructor.SafeConstructor.construct_yaml_int)

    def construct_yaml_float(self, node):
        return self._plain_number(node, PLAIN_DECIMAL, yaml.constructor.SafeConstructor.construct_yaml_float)


def _yaml_kind(value: object) -> str:
    """What YAML made of an unquoted scalar, in words (`on` a boolean, `2001-12-14` a date, `~` nothing)."""
    names = {bool: "a boolean", int: "a number", float: "a number", type(None): "null"}
    return names.get(type(value), f"a {type(value).__name__}")


class _StrictLoader(_Strict, yaml.SafeLoader):
    """PyYAML's own parser: its messages name the character or the alias at fault."""


class _FastStrictLoader(_Strict, getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """libyaml's parser, ~10x faster on a stage file (PyYAML's wheels ship it: yaml.__with_libyaml__)."""


for _loader in (_StrictLoader, _FastStrictLoader):
    _loader.add_constructor("tag:yaml.org,2002:int", _loader.construct_yaml_int)
    _loader.add_constructor("tag:yaml.org,2002:float", _loader.construct_yaml_float)

_KINDS = {
    stat.S_IFDIR: "a folder",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFIFO: "a named pipe (FIFO)",
    stat.S_IFSOCK: "a socket",
}


def _not_regular(path: str, mode: int) -> ConfigError:
    kind = _KINDS.get(stat.S_IFMT(mode), "not a regular file")
    hint = "; `python -m config validate FOLDER` checks every stage in a folder" if stat.S_ISDIR(mode) else ""
    return ConfigError(path, "(file)", f"is {kind}, not a stage file (allowed: a regular <stage>.yaml file{hint})")


def require_folder(config_dir: str | Path) -> str | Path:
    """`config_dir` if it is a folder, else a ConfigError that says what it names instead."""
    try:
        mode = os.stat(config_dir).st_mode
    except (OSError, ValueError) as exc:  # absent, too long, a loop of links, a NUL
        found = "no such folder" if isinstance(exc, FileNotFoundError) else f"cannot be read ({_reason(exc)})"
        raise ConfigError(str(config_dir), "(folder)", f"{found} (expected a folder of <stage>.yaml files)") from None
    if not stat.S_ISDIR(mode):
        kind = "a regular file" if stat.S_ISREG(mode) else _KINDS.get(stat.S_IFMT(mode), "not a folder")
        raise ConfigError(str(config_dir), "(folder)", f"is {kind}, not a folder of <stage>.yaml files")
    return config_dir


def _reason(exc: Exception) -> str:
    return getattr(exc, "strerror", None) or str(exc)


def _read(path: Path, shown: str | None = None) -> str:
    """The file's text: regular files only (a FIFO would block, /dev/zero never ends), at most
    MAX_FILE_BYTES (read at most one byte more, whatever stat said), UTF-8."""
    shown = shown or str(path)
    too_large = f"(allowed: up to {MAX_FILE_BYTES} bytes)"
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):
            raise _not_regular(shown, info.st_mode)
        if info.st_size > MAX_FILE_BYTES:
            raise ConfigError(shown, "(file)", f"{info.st_size} bytes is too large for a stage file {too_large}")
        # O_NONBLOCK: if the file was swapped for a FIFO since stat, opening it does not wait for a writer.
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0))
        try:
            mode = os.fstat(fd).st_mode
            if not stat.S_ISREG(mode):
                raise _not_regular(shown, mode)
            chunks, remaining = [], MAX_FILE_BYTES + 1
            while remaining > 0:
                chunk = os.read(fd, min(remaining, 65536))
                if not chunk:
                    break
                chunks.append(chunk)
                remaining -= len(chunk)
        finally:
            os.close(fd)
        data = b"".join(chunks)
        if len(data) > MAX_FILE_BYTES:
            raise ConfigError(
                shown, "(file)", f"more than {MAX_FILE_BYTES} bytes is too large for a stage file {too_large}"
            )
        return data.decode("utf-8")
    except FileNotFoundError:
        raise ConfigError(shown, "(file)", "no such file (a stage file is config/<stage>.yaml)") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(shown, "(file)", f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise ConfigError(shown, "(file)", f"cannot be read ({exc.strerror})") from None


def _no_explicit_tag(path: str, event: yaml.Event) -> None:
    """A stage file needs no tag: !!int "5" or !!float 1 would hide what the value is, !!python/... what it runs."""
    tag = getattr(event, "tag", None)
    if tag and isinstance(event, yaml.NodeEvent):
        mark = event.start_mark
        raise ConfigError(
            path,
            "(file)",
            f"an explicit YAML tag {short(tag.replace('tag:yaml.org,2002:', '!!'))} at line {mark.line + 1}, column "
            f"{mark.column + 1} (allowed: none; write the value plainly)",
        )


def _check_events(path: str, text: str, loader: type) -> None:
    """One pass over the parser's events (no recursion, no objects built): documents, aliases, depth."""
    aliases = documents = depth = 0
    for event in yaml.parse(text, Loader=loader):
        _no_explicit_tag(path, event)
        if isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            depth += 1
            if depth > MAX_DEPTH:
                raise ConfigError(
                    path,
                    "(file)",
                    f"YAML nested more than {MAX_DEPTH} levels deep (allowed: up to {MAX_DEPTH}; a stage file needs 5)",
                )
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            depth -= 1
        elif isinstance(event, yaml.AliasEvent):
            aliases += 1
            if aliases > MAX_ALIASES:
                raise ConfigError(
                    path, "(file)", f"more than {MAX_ALIASES} YAML aliases (allowed: up to {MAX_ALIASES})"
                )
        elif isinstance(event, yaml.DocumentStartEvent):
            documents += 1
            if documents > 1:
                raise ConfigError(path, "(file)", f"{documents} YAML documents (allowed: exactly one)")


def _expanded_size(path: str, root: yaml.Node) -> None:
    """The number of nodes the document has once every alias is expanded, counted on the node graph
    (each shared node once, so the count itself is linear); a cycle is refused too."""
    sizes: dict[int, int] = {}
    pending: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            if isinstance(node, yaml.MappingNode):
                children = [n for pair in node.value for n in pair]
            else:
                children = list(node.value)
            sizes[key] = 1 + sum(sizes[id(child)] for child in children)
            pending.discard(key)
            if sizes[key] > MAX_NODES:
                raise ConfigError(
                    path,
                    "(file)",
                    f"the YAML expands to more than {MAX_NODES} values (aliases "
                    f"repeat what they refer to; allowed: up to {MAX_NODES})",
                )
            continue
        if key in sizes:
            continue
        if not isinstance(node, (yaml.MappingNode, yaml.SequenceNode)):
            sizes[key] = 1
            continue
        if key in pending:
            raise ConfigError(
                path,
                "(file)",
                "a YAML alias refers to a node that contains it (allowed: aliases of complete values only)",
            )
        pending.add(key)
        stack.append((node, True))
        children = [n for pair in node.value for n in pair] if isinstance(node, yaml.MappingNode) else node.value
        stack.extend((child, False) for child in children if id(child) not in sizes)


def _parse(path: str, text: str) -> object:
    try:
        return _load(path, text, _FastStrictLoader)
    except ConfigError:
        raise  # a limit: both parsers give the same events and nodes
    except Exception:  # noqa: BLE001  any other fault is read again, for the message PyYAML's parser gives
        return _parse_slowly(path, text)


def _load(path: str, text: str, loader_class: type) -> object:
    _check_events(path, text, loader_class)
    loader = loader_class(text)
    try:
        root = loader.get_single_node()
        if root is None:
            return None
        _expanded_size(path, root)
        return loader.construct_document(root)
    finally:
        loader.dispose()


def _parse_slowly(path: str, text: str) -> object:
    """PyYAML's pure-Python parser, whose faults become one ConfigError."""
    try:
        return _load(path, text, _StrictLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(path, "(file)", f"not valid YAML: {exc.problem or exc.context}{where}") from None
    except yaml.reader.ReaderError as exc:  # a character YAML does not allow anywhere (NUL, most C0 controls)
        line = text.count("\n", 0, exc.position) + 1
        where = f"line {line}, column {exc.position - text.rfind(chr(10), 0, exc.position)}"
        code = exc.character if isinstance(exc.character, int) else ord(exc.character)
        raise ConfigError(
            path, "(file)", f"not valid YAML: character U+{code:04X}, which YAML does not allow, at {where}"
        ) from None
    except yaml.YAMLError as exc:
        raise ConfigError(path, "(file)", f"not valid YAML: {short(str(exc), 200)}") from None
    except (RecursionError, MemoryError):
        raise ConfigError(path, "(file)", "YAML nested too deeply") from None
    except ValueError as exc:  # a conversion PyYAML does not guard (a date out of range, say)
        raise ConfigError(
            path, "(file)", f"not valid YAML: a value cannot be converted ({type(exc).__name__})"
        ) from None


# Unicode's invisible bidirectional controls (embeddings, overrides, isolates, marks; UAX #9, and CVE-2021-42574,
# "Trojan Source"): they reorder what an editor or a diff shows, so a reviewer reads another line than the parser.
BIDI_CONTROLS = re.compile("[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")


def _refuse_bidi(path: str, text: str) -> None:
    """No bidirectional control anywhere in the file, comments included: the line and column of the first."""
    found = BIDI_CONTROLS.search(text)
    if found is None:
        return
    start = found.start()
    line, column = text.count("\n", 0, start) + 1, start - text.rfind("\n", 0, start)
    char = found.group()
    raise ConfigError(
        path,
        "(file)",
        f"line {line}, column {column}: U+{ord(char):04X} {unicodedata.name(char)}, an invisible bidirectional "
        "control that shows a reviewer another text than the one parsed (allowed: none, comments included)",
    )


Model = TypeVar("Model", bound=BaseModel)


def load_model(path: str | Path, model: type[Model], what: str) -> Model:
    """Read, parse and validate one YAML file against `model`; any problem is one ConfigError. The path
    is shown as given (a str is kept as typed; `Path` normalises `./config/` to `config`)."""
    shown = str(path)
    text = _read(Path(path), shown)
    _refuse_bidi(shown, text)
    data = _parse(shown, text)
    if data is None:
        raise ConfigError(shown, "(root)", f"the file is empty (expected a mapping of {what} settings)")
    if not isinstance(data, dict):
        raise ConfigError(shown, "(root)", f"expected a mapping of {what} settings, got {type(data).__name__}")
    # Before the model sees the data: a validation message may quote a value, and a secret's must never be.
    rules.refuse_secrets(data, shown)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise from_validation_error(shown, model, exc) from None
    except (RecursionError, OverflowError, ValueError, TypeError) as exc:
        raise ConfigError(shown, "(root)", f"cannot be read as {what} settings ({type(exc).__name__})") from None


def _to_stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def load_stage_file(path: str | Path, warn: Callable[[str], None] = _to_stderr) -> StageConfig:
    """Load and check one stage file: the same checks at validate time and at synth time. A valid stage's warnings
    (config/rules/ warnings: allowed, but most likely a mistake) go to `warn`, one line each: stderr by
    default, so a command prints them and its exit code stays what it was."""
    shown = str(path)
    stem = Path(path).stem
    cfg = load_model(path, StageConfig, "stage")  # a FIFO or a folder is refused as such first, whatever its name
    if not is_stage_file_name(Path(path).name):
        raise ConfigError(
            shown,
            "(file)",
            f"{short(Path(path).name)} is not a stage file's name: the app reads only <stage>.yaml files, <stage> "
            "a stage name (allowed: lower-case letters, digits and '-', then .yaml, e.g. dev.yaml)",
        )
    if cfg.stage != stem:
        raise ConfigError(
            shown,
            "stage",
            f"{short(cfg.stage)} differs from the file name (allowed: {short(stem)}, the file is <stage>.yaml)",
        )
    rules.check(cfg, shown)
    for line in rules.warnings(cfg, shown):
        warn(line)
    return cfg


def stage_files(config_dir: str | Path = CONFIG_DIR) -> list[Path]:
    """Every stage file in the folder, in name order (the order stages are synthesized). Files whose
    name starts with `_` (the pipeline's `_pipeline.yaml`) are not stages."""
    return sorted(p for p in Path(config_dir).glob("*.yaml") if not p.name.startswith("_"))


def _shown(config_dir: str | Path, file: Path) -> str:
    """A stage file's path as the folder was given (`config/` + `dev.yaml` = `config/dev.yaml`)."""
    return os.path.join(str(config_dir), file.name)


def load_stages(
    config_dir: str | Path = CONFIG_DIR, only: str | None = None, warn: Callable[[str], None] = _to_stderr
) -> list[StageConfig]:
    """All stages of the folder, or just `only`; every file is checked before any stage is built, and
    the stages of the folder together: no two may collide in one account and region (rules.check_together).
    With `only`, just that stage is read (another stage file's mistake does not block it). `warn`: as
    load_stage_file's."""
    folder = Path(require_folder(config_dir))
    files = stage_files(config_dir)
    if only is not None:
        wanted = folder / f"{only}.yaml"
        if wanted not in files:
            names = ", ".join(file.stem for file in files) or "none"
            raise ConfigError(str(wanted), "(file)", f"no stage named {short(only)} (allowed: {names})")
        files = [wanted]
    if not files:
        raise ConfigError(str(config_dir), "(folder)", "no stage files (expected <stage>.yaml files)")
    loaded = [(load_stage_file(_shown(config_dir, file), warn), _shown(config_dir, file)) for file in files]
    rules.check_together(loaded)
    return [cfg for cfg, _ in loaded]

"""Loading YAML files into pydantic models with errors that name the file, the key and the line.

Every config file the advisor reads (ladders, suites) goes through `load_model`, so a malformed file always
yields one `ConfigError` of the form ``file:line: key.path: what is wrong``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from advisor.errors import ConfigError

M = TypeVar("M", bound=BaseModel)


class _LineLoader(yaml.SafeLoader):
    """A SafeLoader that remembers the line of every mapping key (1-based) in ``_lines``."""


def _construct_mapping(loader: _LineLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise ConfigError(
                f"{loader.name}:{key_node.start_mark.line + 1}: duplicate key {key!r} "
                f"(first at line {seen[key]})"
            )
        seen[key] = key_node.start_mark.line + 1
    mapping = _LineDict(loader.construct_mapping(node, deep=deep))
    mapping.lines = seen
    mapping.line = node.start_mark.line + 1
    return mapping


class _LineDict(dict):
    """A dict that also knows the source line of itself and of each key."""

    lines: dict[Any, int]
    line: int


class _LineList(list):
    line: int
    item_lines: list[int]


def _construct_sequence(loader: _LineLoader, node: yaml.SequenceNode, deep: bool = False) -> list:
    seq = _LineList(loader.construct_sequence(node, deep=deep))
    seq.line = node.start_mark.line + 1
    seq.item_lines = [child.start_mark.line + 1 for child in node.value]
    return seq


_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
_LineLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_sequence)


def read_yaml(path: str | Path) -> Any:
    """Parse a YAML file, keeping line numbers; syntax errors become a `ConfigError` naming file and line."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"{path}: file not found") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror})") from None
    loader = _LineLoader(text)
    loader.name = str(path)
    try:
        return loader.get_single_data()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise ConfigError(f"{where}: invalid YAML: {exc.problem or exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML: {exc}") from None
    finally:
        loader.dispose()


def line_of(data: Any, loc: tuple[Any, ...]) -> int | None:
    """Best line number for a pydantic error location inside data parsed by `read_yaml`."""
    line = getattr(data, "line", None)
    node = data
    for part in loc:
        if isinstance(node, _LineDict):
            if part in node.lines:
                line = node.lines[part]
            node = node.get(part)
        elif isinstance(node, _LineList) and isinstance(part, int) and part < len(node):
            line = node.item_lines[part]
            node = node[part]
        else:
            break
    return line


def format_validation_error(path: str | Path, data: Any, exc: ValidationError) -> str:
    """Turn a pydantic ValidationError into ``file:line: key: message`` lines."""
    lines = []
    for err in exc.errors():
        loc = tuple(err["loc"])
        line = line_of(data, loc)
        key = ".".join(str(p) for p in loc) or "(top level)"
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = "unknown key"
        elif err["type"] == "missing":
            msg = "required key is missing"
        where = f"{path}:{line}" if line else str(path)
        lines.append(f"{where}: {key}: {msg}")
    return "\n".join(lines)


def validate(model: type[M], data: Any, path: str | Path, context: dict | None = None) -> M:
    """Validate parsed YAML data against a pydantic model, raising a `ConfigError` with file/line/key."""
    try:
        return model.model_validate(data, context=context)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(path, data, exc)) from None


def load_model(model: type[M], path: str | Path, context: dict | None = None) -> M:
    """Read a YAML file and validate it as `model`."""
    data = read_yaml(path)
    if data is None:
        raise ConfigError(f"{path}: file is empty")
    return validate(model, data, path, context)

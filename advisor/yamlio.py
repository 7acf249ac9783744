"""Loading YAML files into pydantic models with errors that name the file, the key and the line.

Every config file the advisor reads (ladders, suites, skills) goes through `read_text`, and every YAML file
through `read_yaml`, so a malformed file always yields one `ConfigError` of the form
``file:line: key.path: what is wrong``. Input is bounded: text must be UTF-8 (a UTF-8 byte-order mark is
accepted; any other encoding is refused with the byte offset of the first bad byte), a file may be at most
`max_input_bytes` (10 MB unless ``ADVISOR_MAX_INPUT_MB`` says otherwise), and YAML aliases may be used at most
`MAX_ALIASES` times and expand to at most `MAX_ALIAS_EXPANSION` extra nodes (a billion-laughs file fails fast), and nesting is bounded
(`advisor.nesting`: 100 levels unless ``ADVISOR_MAX_NESTING`` says otherwise).
"""

from __future__ import annotations

import codecs
import stat
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from advisor.env_limits import mib_limit
from advisor.errors import ConfigError
from advisor.nesting import max_nesting, too_deep

M = TypeVar("M", bound=BaseModel)

DEFAULT_MAX_INPUT_MB = 10  #: size limit of one suite, ladder or skill file unless ADVISOR_MAX_INPUT_MB is set
MAX_INPUT_ENV = "ADVISOR_MAX_INPUT_MB"
MAX_ALIASES = 100  #: YAML alias uses per file
MAX_ALIAS_EXPANSION = 10_000  #: extra nodes all aliases of a file may expand to

_BOMS = ((codecs.BOM_UTF32_LE, "UTF-32"), (codecs.BOM_UTF32_BE, "UTF-32"), (codecs.BOM_UTF16_LE, "UTF-16"),
         (codecs.BOM_UTF16_BE, "UTF-16"))


def max_input_bytes() -> int:
    """The size limit of one input file in bytes (``ADVISOR_MAX_INPUT_MB``, default 10 MiB)."""
    return mib_limit(MAX_INPUT_ENV, DEFAULT_MAX_INPUT_MB)


def utf8_error(path: str | Path, exc: UnicodeDecodeError, offset: int = 0, line: int | None = None) -> str:
    """The one-line message for bytes that are not UTF-8: file, byte offset (and line), and what to do.

    `offset` is the file position of the start of ``exc.object``.
    """
    bad = exc.object[exc.start]
    where = f", line {line}" if line else ""
    return (f"{path}: not UTF-8 text (byte 0x{bad:02x} at byte {offset + exc.start}{where}); save the file as "
            "UTF-8 (with or without a byte-order mark)")


def _refuse_other_bom(path: str | Path, head: bytes, error: type[Exception]) -> None:
    for bom, name in _BOMS:
        if head.startswith(bom):
            raise error(f"{path}: {name} text (byte-order mark at byte 0); save the file as UTF-8")


def decode_utf8(path: str | Path, data: bytes) -> str:
    """Bytes of a text file as str: UTF-8, a leading UTF-8 byte-order mark dropped; `ConfigError` otherwise."""
    _refuse_other_bom(path, data[:4], ConfigError)
    skip = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    try:
        return data[skip:].decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:skip + exc.start].count(b"\n") + 1
        raise ConfigError(utf8_error(path, exc, skip, line)) from None


def check_utf8(path: str | Path, error: type[Exception] = ConfigError) -> None:
    """Stream a (possibly large) file; raise `error` naming the byte offset of the first non-UTF-8 byte."""
    with open(path, "rb") as fh:
        _refuse_other_bom(path, fh.read(4), error)
        fh.seek(0)
        offset, carry, lines = 0, b"", 0
        while True:
            chunk = fh.read(1 << 20)
            data = carry + chunk
            try:
                data.decode("utf-8")
                carry = b""
            except UnicodeDecodeError as exc:
                if chunk and exc.end == len(data) and exc.reason == "unexpected end of data":
                    carry = data[exc.start:]  # a character cut by the chunk boundary: decode it with the next
                    data = data[:exc.start]
                else:
                    raise error(utf8_error(path, exc, offset, lines + data[:exc.start].count(b"\n") + 1)) from None
            if not chunk:
                return
            offset += len(data)
            lines += data.count(b"\n")


def read_text(path: str | Path, what: str = "file") -> str:
    """A UTF-8 input file as text, within the size limit; every problem is one `ConfigError` naming the file."""
    return decode_utf8(path, read_bounded(path, max_input_bytes(), what))


def read_bounded(path: str | Path, limit: int, what: str = "file", error: type[Exception] = ConfigError,
                 hint: str = f"; set {MAX_INPUT_ENV} to raise it") -> bytes:
    """The bytes of a regular file of at most `limit` bytes. A folder, a FIFO, a device or a socket is refused
    before it is opened (a FIFO would block, ``/dev/zero`` never ends), the size is checked before reading, and
    the read itself stops at `limit` + 1 bytes (a file that grows meanwhile). Every problem is one `error`
    naming the file and the rule."""
    path = Path(path)
    try:
        st = path.stat()
        if stat.S_ISDIR(st.st_mode):
            raise error(f"{path}: is a folder, not a {what}")
        if not stat.S_ISREG(st.st_mode):
            raise error(f"{path}: not a regular file (a FIFO, device or socket); give the {what} as a file")
        if st.st_size > limit:
            raise error(f"{path}: {st.st_size / 1048576:.1f} MB is over the {limit / 1048576:g} MB limit on input "
                        f"files{hint}")
        with open(path, "rb") as fh:
            data = fh.read(limit + 1)
    except FileNotFoundError:
        raise error(f"{path}: file not found") from None
    except OSError as exc:
        raise error(f"{path}: cannot read ({exc.strerror})") from None
    if len(data) > limit:
        raise error(f"{path}: grew past the {limit / 1048576:g} MB limit on input files while being read")
    return data


class _LineLoader(yaml.SafeLoader):
    """A SafeLoader that remembers the line of every mapping key and bounds alias use (billion laughs)."""

    def __init__(self, stream):
        super().__init__(stream)
        self._aliases = 0
        self._expansion = 0
        self._weights: dict[int, int] = {}
        self._depth = 0
        self._heights: dict[int, int] = {}
        self._max_depth = max_nesting()

    def compose_node(self, parent, index):
        """Compose one node, refusing nesting deeper than the limit (aliased nodes counted at their full height)."""
        mark = self.peek_event().start_mark
        self._depth += 1
        try:
            if self._depth > self._max_depth:
                raise ConfigError(too_deep(f"{self.name}:{mark.line + 1}", "YAML", self._max_depth))
            node = self._compose_counted(parent, index)
        finally:
            self._depth -= 1
        height = self._heights.get(id(node))
        if height is None:
            children = node.value if isinstance(node, yaml.SequenceNode) else (
                [n for kv in node.value for n in kv] if isinstance(node, yaml.MappingNode) else [])
            height = self._heights[id(node)] = 1 + max((self._heights.get(id(c), 1) for c in children), default=0)
        if self._depth + height > self._max_depth:
            raise ConfigError(too_deep(f"{self.name}:{mark.line + 1}", "YAML (with its aliases)", self._max_depth))
        return node

    def _compose_counted(self, parent, index):
        if self.check_event(yaml.events.AliasEvent):
            event = self.peek_event()
            anchor = event.anchor
            if anchor in self.anchors:
                where = f"{self.name}:{event.start_mark.line + 1}"
                self._aliases += 1
                if self._aliases > MAX_ALIASES:
                    raise ConfigError(f"{where}: more than {MAX_ALIASES} YAML aliases (*{anchor}) in one file; "
                                      "write the values out instead of aliasing them")
                self._expansion += self._weight(self.anchors[anchor], where)
                if self._expansion > MAX_ALIAS_EXPANSION:
                    raise ConfigError(f"{where}: YAML aliases (*{anchor}) expand to more than "
                                      f"{MAX_ALIAS_EXPANSION} nodes (a billion-laughs file?); write the values out "
                                      "instead of nesting aliases")
        return super().compose_node(parent, index)

    def _weight(self, node, where: str, depth: int = 0) -> int:
        """Nodes `node` expands to (aliases counted in full), memoized; a recursive alias is refused."""
        key = id(node)
        if key in self._weights:
            if self._weights[key] < 0:
                raise ConfigError(f"{where}: recursive YAML alias; write the value out")
            return self._weights[key]
        self._weights[key] = -1
        total = 1
        if isinstance(node, yaml.SequenceNode):
            total += sum(self._weight(child, where) for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            total += sum(self._weight(k, where) + self._weight(v, where) for k, v in node.value)
        self._weights[key] = total
        return total


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
    text = read_text(path, "YAML file")
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


def _data_loc(data: Any, loc: tuple[Any, ...]) -> tuple[Any, ...]:
    """A pydantic error location without the tags of tagged unions (``price.tokens.usd_per_m_input`` ->
    ``price.usd_per_m_input``): a part that is not a key of the data is dropped when the next part is."""
    out: list[Any] = []
    node = data
    parts = list(loc)
    for i, part in enumerate(parts):
        if isinstance(node, dict):
            if part not in node and i + 1 < len(parts) and parts[i + 1] in node:
                continue
            node = node.get(part)
        elif isinstance(node, list) and isinstance(part, int) and part < len(node):
            node = node[part]
        else:
            node = None
        out.append(part)
    return tuple(out)


def format_validation_error(path: str | Path, data: Any, exc: ValidationError) -> str:
    """Turn a pydantic ValidationError into ``file:line: key: message`` lines."""
    lines = []
    for err in exc.errors():
        loc = _data_loc(data, tuple(err["loc"]))
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


class _Dumper(yaml.SafeDumper):
    def ignore_aliases(self, data):
        return True


def _str(dumper, value: str):
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


_Dumper.add_representer(str, _str)


def dump_yaml(data: Any) -> str:
    """`data` as YAML a person can read: keys in their order, no aliases, multi-line strings as blocks."""
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=120)

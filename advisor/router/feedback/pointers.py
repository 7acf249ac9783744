"""Where the promoted router is kept: a pointer file beside a DuckDB store, or a pointer row in PostgreSQL.

Promotion (`advisor.router.feedback.promotion`) and the service's hot reload (`advisor.service.routing.reload`) talk to one of
two objects with the same methods:

- `FilePointer`: ``<store>.router/promoted.json`` and the artifacts copied beside it under their hash (one
  machine, or a shared folder).
- `DatabasePointer`: the ``promoted`` row of ``router_pointers`` and the artifact bytes in ``router_artifacts``
  of a PostgreSQL store (`advisor.store.RouterRegistry`), so every replica of the service reads the same
  pointer. A worker materialises the named artifact once into a local cache folder (by sha256) and loads it
  from there, as it loads a file.

`read()` returns the pointer as a dict with the local ``artifact`` path, its ``sha256`` and ``router_version``;
`keep(path, sha, version)` stores a candidate and returns what a promotion record names; `write(...)` makes the
pointer name it; `fetch(sha, recorded)` gives back a kept artifact's local file (for rollback).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from advisor.errors import RouterError
from advisor.nesting import load_json
from advisor.records import now
from advisor.store import Reconnecting, is_database_url
from advisor.store.protocols import redact

POINTER_FORMAT = "advisor-router-pointer"


def default_pointer(store_path: str | Path) -> Path:
    """The promoted pointer of a store: ``<store>.router/promoted.json``."""
    return Path(f"{store_path}.router") / "promoted.json"


def sha256_of(path: str | Path) -> str:
    """sha256 of a file's bytes."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def is_pointer(path: str | Path) -> bool:
    """True when `path` is a promoted pointer (not an artifact)."""
    path = Path(path)
    if path.suffix != ".json" or not path.is_file() or path.stat().st_size > 65536:
        return False
    try:
        return load_json(path.read_text(encoding="utf-8"), str(path), RouterError).get("format") == POINTER_FORMAT
    except (ValueError, AttributeError, OSError, RouterError):
        return False


def read_pointer(path: str | Path) -> dict[str, Any]:
    """The pointer's content (RouterError when missing or damaged); its artifact path made absolute."""
    path = Path(path)
    try:
        data = load_json(path.read_text(encoding="utf-8"), str(path), RouterError)
    except FileNotFoundError:
        raise RouterError(f"{path}: no promoted router yet (promote one with `advisor router promote FILE`)") from None
    except (ValueError, OSError) as exc:
        raise RouterError(f"{path}: damaged promoted pointer ({exc}); promote again or roll back") from None
    if not isinstance(data, dict) or data.get("format") != POINTER_FORMAT or "artifact" not in data:
        raise RouterError(f"{path}: not a promoted pointer (format {POINTER_FORMAT!r} with an artifact)")
    art = Path(data["artifact"])
    data["artifact"] = str(art if art.is_absolute() else path.parent / art)
    return data


def write_pointer(pointer: Path, artifact: Path, sha: str, version: str, promotion_id: str) -> None:
    """Point `pointer` at `artifact` (a name beside it): write a temporary file, then rename it over."""
    pointer.parent.mkdir(parents=True, exist_ok=True)
    body = {"format": POINTER_FORMAT, "version": 1, "artifact": artifact.name, "sha256": sha,
            "router_version": version, "promoted_at": str(now()), "promotion_id": promotion_id}
    tmp = pointer.with_name(f".{pointer.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(body, indent=2) + "\n")
    os.replace(tmp, pointer)


class FilePointer:
    """A pointer file and the artifacts kept in its folder."""

    def __init__(self, path: str | Path):
        self.path = Path(path)

    def __str__(self) -> str:
        return str(self.path)

    def exists(self) -> bool:
        """True when something was promoted."""
        return self.path.exists()

    def read(self) -> dict[str, Any]:
        """The pointer's content (RouterError when missing or damaged)."""
        return read_pointer(self.path)

    def keep(self, candidate: Path, sha: str, version: str) -> str:
        """Copy the candidate beside the pointer under its hash (never overwritten); its kept path."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        kept = self.path.parent / f"{sha[:12]}{candidate.suffix}"
        if not kept.exists():
            tmp = kept.with_name(f".{kept.name}.tmp")
            shutil.copyfile(candidate, tmp)
            os.replace(tmp, kept)
        return str(kept)

    def write(self, kept: str, sha: str, version: str, promotion_id: str) -> None:
        """Point at a kept artifact (write + rename)."""
        write_pointer(self.path, Path(kept), sha, version, promotion_id)

    def fetch(self, sha: str, recorded: str) -> Path:
        """The kept artifact `recorded` names, checked against its sha256."""
        prev = Path(recorded)
        if not prev.is_file() or sha256_of(prev) != sha:
            raise RouterError(f"{prev}: the previous artifact is missing or changed (sha256 differs); promote a "
                              "router explicitly with `advisor router promote FILE --force`")
        return prev


class DatabasePointer:
    """The ``promoted`` pointer of a PostgreSQL store, with artifacts cached locally by sha256."""

    def __init__(self, url: str, name: str = "promoted", cache: str | Path | None = None):
        self.url, self.name = url, name
        self.cache = Path(cache) if cache else Path(tempfile.gettempdir()) / "advisor-artifacts"
        self._db = Reconnecting(url, label=str(self))

    def __str__(self) -> str:
        return f"{redact(self.url)}#{self.name}"

    def store(self):
        """The registry connection (opened on first use, reopened after the database went away)."""
        return self._db.store()

    def close(self) -> None:
        """Close the connection."""
        self._db.close()

    def _call(self, method: str, *args: Any) -> Any:
        return self._db.call(method, *args)

    def exists(self) -> bool:
        """True when something was promoted."""
        return self._call("pointer", self.name) is not None

    def current_sha(self) -> str | None:
        """The sha256 the pointer names now (one small query: what a worker polls)."""
        row = self._call("pointer", self.name)
        return row["sha256"] if row else None

    def read(self) -> dict[str, Any]:
        """The pointer as `FilePointer.read` gives it, its artifact materialised locally."""
        row = self._call("pointer", self.name)
        if row is None:
            raise RouterError(f"{self}: no promoted router yet (promote one with `advisor router promote FILE "
                              "--store URL`)")
        return {"format": "advisor-router-pointer", "artifact": str(self.fetch(row["sha256"], None)),
                "sha256": row["sha256"], "router_version": row["router_version"],
                "promotion_id": row["promotion_id"], "promoted_at": str(row["promoted_at"])}

    def keep(self, candidate: Path, sha: str, version: str) -> str:
        """Store the candidate's bytes in the registry; what the promotion record names (``sha256:...``)."""
        self._call("put_artifact", sha, candidate.suffix, version, candidate.read_bytes())
        return f"sha256:{sha}"

    def write(self, kept: str, sha: str, version: str, promotion_id: str) -> None:
        """Point at a kept artifact (one row, replaced in place)."""
        self._call("set_pointer", sha, version, promotion_id, self.name)

    def fetch(self, sha: str, recorded: str | None) -> Path:
        """The kept artifact's local file (written once into the cache folder, checked by sha256)."""
        for suffix in (".json", ".npz"):
            cached = self.cache / f"{sha[:16]}{suffix}"
            if cached.is_file():
                return cached
        found = self._call("artifact", sha)
        if found is None:
            raise RouterError(f"{self}: artifact sha256 {sha[:12]} is not in the registry; promote a router "
                              "explicitly with `advisor router promote FILE --force`")
        suffix, body = found
        if hashlib.sha256(body).hexdigest() != sha:
            raise RouterError(f"{self}: artifact sha256 {sha[:12]} is damaged in the registry (its bytes hash "
                              "differently)")
        self.cache.mkdir(parents=True, exist_ok=True)
        cached = self.cache / f"{sha[:16]}{suffix}"
        tmp = cached.with_name(f".{cached.name}.{os.getpid()}.tmp")
        tmp.write_bytes(body)
        os.replace(tmp, cached)
        return cached


def pointer_for(location: str | Path):
    """The pointer `location` names: a PostgreSQL store URL (its ``promoted`` row), else a pointer file."""
    return DatabasePointer(str(location)) if is_database_url(location) else FilePointer(location)

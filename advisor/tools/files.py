"""Workspace file tools: list_files, read_file, write_file.

Every path is relative to the episode's scratch workspace. A path that escapes it (absolute paths, ``..``,
symlinks pointing outside) is refused with a `ToolError`, never followed; list_files names a symbolic link without
following it, not even for its size (`workspace_files`).
"""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any, Iterator

from advisor.tools.base import ToolError, ToolSpec, object_schema, register_tool
from advisor.tools.tree import walk_entries

MAX_READ_CHARS = 20_000  #: read_file returns at most this many characters (the rest is cut, with a note)
MAX_WRITE_CHARS = 1_000_000  #: write_file refuses larger contents
MAX_LIST_ENTRIES = 200


def resolve_in_workspace(workspace: Path, rel: str) -> Path:
    """The absolute path of `rel` inside `workspace`; raise `ToolError` when it would escape the workspace."""
    if not isinstance(rel, str) or not rel.strip():
        raise ToolError("path must be a non-empty string relative to the workspace")
    if "\x00" in rel:
        raise ToolError("path contains a NUL byte")
    root = workspace.resolve()
    candidate = Path(rel)
    if candidate.is_absolute():
        raise ToolError(f"sandbox: path {rel!r} is absolute; use a path relative to the workspace")
    target = (root / candidate).resolve()
    if target != root and root not in target.parents:
        raise ToolError(f"sandbox: path {rel!r} escapes the workspace; only files inside it can be used")
    return target


def workspace_files(root: Path, folder: Path | None = None) -> Iterator[tuple[str, int | None]]:
    """(path relative to `root`, size in bytes) of every regular file under `folder` (default `root`), sorted;
    a symbolic link is given with size None and never followed, not even to read its target's size; other
    special files (FIFOs, sockets, devices) are left out."""
    root = Path(root)
    found = []
    for path, info in walk_entries(folder or root):  # iterative: a tree of any depth
        rel = Path(path).relative_to(root).as_posix()
        if stat.S_ISLNK(info.st_mode):
            found.append((rel, None))
        elif stat.S_ISREG(info.st_mode):
            found.append((rel, info.st_size))
    return iter(sorted(found))


@register_tool
class ListFiles:
    """List the files of the workspace (or of a folder inside it)."""

    spec = ToolSpec(
        name="list_files",
        description="List the files in the workspace (recursively), or in a folder inside it.",
        parameters=object_schema({"path": {"type": "string", "description": "Folder relative to the workspace; default '.'."}}, []),
    )

    async def run(self, env, arguments: dict[str, Any]) -> str:
        """Return one relative path per line, with sizes (symbolic links are named, never followed)."""
        folder = resolve_in_workspace(env.workspace, arguments.get("path", "."))
        if not folder.is_dir():
            raise ToolError(f"no such folder in the workspace: {arguments.get('path')!r}")
        rows = [f"{rel}  ({size} bytes)" if size is not None else f"{rel}  (symbolic link, not followed)"
                for rel, size in workspace_files(env.workspace.resolve(), folder)]
        if not rows:
            return "(no files)"
        more = len(rows) - MAX_LIST_ENTRIES
        rows = rows[:MAX_LIST_ENTRIES] + ([f"... and {more} more"] if more > 0 else [])
        return "\n".join(rows)


@register_tool
class ReadFile:
    """Read a text file of the workspace."""

    spec = ToolSpec(
        name="read_file",
        description="Read a text file from the workspace.",
        parameters=object_schema({"path": {"type": "string", "description": "File path relative to the workspace."}}, ["path"]),
    )

    async def run(self, env, arguments: dict[str, Any]) -> str:
        """Return the file's text (cut after MAX_READ_CHARS characters)."""
        path = resolve_in_workspace(env.workspace, arguments["path"])
        if not path.is_file():
            raise ToolError(f"no such file in the workspace: {arguments['path']!r}")
        text = path.read_text(encoding="utf-8", errors="replace")
        if len(text) > MAX_READ_CHARS:
            return text[:MAX_READ_CHARS] + f"\n[... cut: file has {len(text)} characters]"
        return text


@register_tool
class WriteFile:
    """Write (create or replace) a text file in the workspace."""

    spec = ToolSpec(
        name="write_file",
        description="Create or overwrite a text file in the workspace with the given content.",
        parameters=object_schema({
            "path": {"type": "string", "description": "File path relative to the workspace."},
            "content": {"type": "string", "description": "The full new content of the file."},
        }, ["path", "content"]),
    )

    async def run(self, env, arguments: dict[str, Any]) -> str:
        """Write the file (creating folders) and report its size."""
        content = arguments["content"]
        if len(content) > MAX_WRITE_CHARS:
            raise ToolError(f"content too large ({len(content)} characters; limit {MAX_WRITE_CHARS})")
        path = resolve_in_workspace(env.workspace, arguments["path"])
        if path.is_dir():
            raise ToolError(f"{arguments['path']!r} is a folder")
        limit = env.limits.workspace_mb * 1024 * 1024
        used = sum(size or 0 for rel, size in workspace_files(env.workspace.resolve()) if rel != path.relative_to(
            env.workspace.resolve()).as_posix())
        if used + len(content.encode("utf-8")) > limit:
            raise ToolError(f"disk space limit reached: the workspace holds at most {env.limits.workspace_mb} MiB "
                            f"(workspace_mb); {used} bytes are used")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
        return f"wrote {len(content.encode('utf-8'))} bytes to {arguments['path']}"


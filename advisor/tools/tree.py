"""Walking and removing a workspace folder tree of any depth, without recursion and following no link.

Model-written code can leave a folder tree thousands of levels deep (issue 38: 1,500 levels); ``os.walk`` and
``shutil.rmtree`` of Python 3.11 recurse once per level and stop with RecursionError past about 1,000. These
keep an explicit stack instead; removal works through folder file descriptors, so a path longer than the
system's limit (4,096 bytes) is removed too.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Iterator


def walk_entries(folder: str | Path) -> Iterator[tuple[str, os.stat_result]]:
    """(path, lstat) of everything under `folder`, folders before their contents; links are listed, never
    followed; an entry that cannot be read (gone, path too long) is left out."""
    stack = [str(folder)]
    while stack:
        here = stack.pop()
        try:
            entries = list(os.scandir(here))
        except OSError:
            continue
        for entry in entries:
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            yield entry.path, info
            if stat.S_ISDIR(info.st_mode):
                stack.append(entry.path)


def remove_tree(path: str | Path) -> None:
    """Delete `path` (a file, a link or a folder tree of any depth); errors are ignored, as with
    ``shutil.rmtree(path, ignore_errors=True)``."""
    path = str(path)
    try:
        if not stat.S_ISDIR(os.lstat(path).st_mode):
            os.unlink(path)
            return
        top = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError:
        return
    stack = [(top, None, None, set())]  # (folder fd, parent fd, name in parent, subfolders given up on)
    while stack:
        fd, parent, name, given_up = stack[-1]
        child = _next_folder(fd, given_up)
        if child is not None:
            given_up.add(child)  # entered once, or not at all: never again from here
            try:
                sub = os.open(child, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
            except OSError:
                continue
            stack.append((sub, fd, child, set()))
            continue
        stack.pop()
        os.close(fd)
        if parent is not None:
            _quiet(os.rmdir, name, dir_fd=parent)
    _quiet(os.rmdir, path)


def _next_folder(fd: int, given_up: set[str]) -> str | None:
    """Unlink every non-folder in the folder `fd`; the name of a subfolder not in `given_up`, or None."""
    try:
        entries = list(os.scandir(fd))
    except OSError:
        return None
    folder = None
    for entry in entries:
        try:
            is_dir = entry.is_dir(follow_symlinks=False)
        except OSError:
            continue
        if is_dir:
            if folder is None and entry.name not in given_up:
                folder = entry.name
        else:
            _quiet(os.unlink, entry.name, dir_fd=fd)
    return folder


def _quiet(call, *args, **kwargs) -> None:
    try:
        call(*args, **kwargs)
    except OSError:
        pass

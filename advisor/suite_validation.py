"""Load-time checks of a suite that pydantic's field types cannot express.

`load_suite` runs these before anything is served or probed, so a suite that would fail mid-probe fails at
``advisor suite validate`` instead, with one `ConfigError` naming the file, the line and the key:

- class names are unique;
- every regex (regex checks, state-check paths and headers, fixture API routes) compiles, and regex flags are
  among ``i``, ``m``, ``s``;
- a ``tool_call`` check (and a reference step) names a tool that exists;
- check targets are ``final``, ``calls``, ``api_log`` or ``file:<path>``;
- (the checks specific to one check type are its spec's `problems`, declared with the check in
  advisor/checks/; this module provides the helpers they share)
- every path is confined: the skill document inside the suite's folder, fixture files and checked files
  inside the episode's workspace (relative, no ``..`` out of it).
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Any, Callable

from advisor.errors import ConfigError, did_you_mean

REGEX_FLAGS = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL}  #: letters a regex check's `flags` takes
TARGETS = ("final", "calls", "api_log")  #: targets besides file:<path>

Where = Callable[..., str]  #: where(*loc) -> "file:line"


def regex_flags(letters: str) -> int:
    """The `re` flags of a regex check's ``flags`` letters (ValueError naming an unknown letter)."""
    out = 0
    for letter in letters:
        if letter not in REGEX_FLAGS:
            raise ValueError(f"unknown regex flag {letter!r}; use any of {', '.join(REGEX_FLAGS)}")
        out |= REGEX_FLAGS[letter]
    return out


def workspace_path_problem(rel: Any) -> str | None:
    """Why `rel` is not a path inside a workspace (None when it is): empty, absolute, NUL, or ``..`` out."""
    if not isinstance(rel, str) or not rel.strip():
        return "must be a non-empty path relative to the workspace"
    if "\x00" in rel:
        return "contains a NUL byte"
    if rel.startswith("/") or re.match(r"^[A-Za-z]:[\\/]", rel):
        return f"{rel!r} is absolute; use a path relative to the workspace"
    norm = posixpath.normpath(rel.replace("\\", "/"))
    if norm == ".." or norm.startswith("../"):
        return f"{rel!r} escapes the workspace; use a path inside it"
    return None


def skill_path(suite_path: Path, skill: str) -> tuple[Path | None, str | None]:
    """The skill file of a task, confined to the suite's folder: (path, None) or (None, why not)."""
    folder = suite_path.parent.resolve()
    if Path(skill).is_absolute():
        return None, f"{skill!r} is outside the suite's folder {folder}; put the skill beside the suite"
    target = (folder / skill).resolve()
    if folder not in target.parents:
        return None, (f"{skill!r} is outside the suite's folder {folder}; put the skill beside the suite "
                      "(or in a folder under it)")
    return target, None


def regex_problem(pattern: Any, flags: int = 0) -> str | None:
    """Why `pattern` is not a valid Python regex (None when it compiles, or is not a string)."""
    if not isinstance(pattern, str):
        return None
    try:
        re.compile(pattern, flags)
    except re.error as exc:
        return f"invalid regex {pattern!r} ({exc}); fix the pattern (Python `re` syntax)"
    return None


def _compile(pattern: Any, flags: int, key: str, where: str) -> None:
    problem = regex_problem(pattern, flags)
    if problem:
        raise ConfigError(f"{where}: {key}: {problem}")


def _check_criterion(check: Any, key: str, where: Where, loc: tuple, known_tools: set[str] | None) -> None:
    target = getattr(check, "target", None)
    if isinstance(target, str) and target not in TARGETS:
        if not target.startswith("file:"):
            raise ConfigError(f"{where(*loc, 'target')}: {key}.target: unknown target {target!r}; use "
                              f"{', '.join(TARGETS)} or file:<path>")
        problem = workspace_path_problem(target[len("file:"):])
        if problem:
            raise ConfigError(f"{where(*loc, 'target')}: {key}.target: {problem}")
    for rel, problem in check.problems(known_tools):  # each check type's own load-time checks
        raise ConfigError(f"{where(*loc, *rel)}: {'.'.join((key, *rel))}: {problem}")


def check_classes(suite: Any, where: Where) -> None:
    """Class names are unique."""
    seen: dict[str, int] = {}
    for i, cls in enumerate(suite.classes):
        if cls.name in seen:
            raise ConfigError(f"{where('classes', i, 'name')}: classes.{i}.name: duplicate class name "
                              f"{cls.name!r} (also classes.{seen[cls.name]}); give each class its own name")
        seen[cls.name] = i


def check_task(task: Any, i: int, where: Where, known_tools: set[str] | None) -> None:
    """Regexes compile, tools exist, targets and paths are confined, for task number `i`. A replayed live step's
    checks may name the tools its conversation offered."""
    if getattr(task, "replay", None) is not None and known_tools is not None:
        known_tools = known_tools | {str(s.get("name")) for s in task.replay.conversation.get("specs") or []}
    for rel in task.fixtures.files:
        problem = workspace_path_problem(rel)
        if problem:
            raise ConfigError(f"{where('tasks', i, 'fixtures', 'files', rel)}: tasks.{i}.fixtures.files: "
                              f"fixture file {problem}")
    for j, route in enumerate(task.fixtures.api):
        if route.path.startswith("^"):
            _compile(route.path, 0, f"tasks.{i}.fixtures.api.{j}.path", where("tasks", i, "fixtures", "api", j, "path"))
    for listname in ("instruction_following", "task_completion"):
        for j, criterion in enumerate(getattr(task, listname)):
            loc = ("tasks", i, listname, j, "check")
            _check_criterion(criterion.check, f"tasks.{i}.{listname}.{j}.check", where, loc, known_tools)
    if task.reference is not None and known_tools is not None:
        for j, step in enumerate(task.reference.steps):
            if step.tool not in known_tools:
                raise ConfigError(f"{where('tasks', i, 'reference', 'steps', j, 'tool')}: "
                                  f"tasks.{i}.reference.steps.{j}.tool: unknown tool {step.tool!r}."
                                  f"{did_you_mean(step.tool, known_tools)}")

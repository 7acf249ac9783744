"""Import Tessl eval scenarios (a scenario, a tile, or any tree of tiles) into an advisor suite YAML.

The layout, found at any depth under the folder given:
- a **tile** is a folder with ``tile.json`` (``"name"``, and ``"skills"``: ``{name: {"path": ...}}``, a list of
  ``{"name", "path"}`` objects, or a list of paths, each to a ``SKILL.md`` or its folder);
- a **scenario** is a folder with ``task.md`` and ``criteria.json`` (a ``weighted_checklist`` with optional
  ``context``), optionally ``capability.txt`` and its own ``SKILL.md``; it belongs to the nearest tile above it.

What becomes of each part:
- ids are ``<tile>-<scenario path inside the tile>`` (``payments-scenario-1``), readable and unique;
- the class is chosen by ``class_by``: ``skill`` (default: the skill the scenario is run with, else its tile),
  ``tile``, or ``capability`` (the first line of ``capability.txt``, never truncated);
- ``=== FILE: inputs/x ===`` blocks in ``task.md`` become workspace fixtures and leave the instructions (a
  line says the file is in the workspace); other small text files of the scenario folder are fixtures too;
- the skill's ``SKILL.md`` is copied to ``skills/`` beside the suite; the skill folder's other files
  (``references/``, ``scripts/``, ...) become documents of the with-skill condition only (``skill_docs``);
- criteria, weights, the IF/TC assignment and derived deterministic checks: `advisor.importers.tessl_criteria`.

Every file is read **inside the tree given**: a path that leads out of it (a symlink, an absolute or ``..``
path in ``tile.json``) is refused, as is anything but a regular file (a FIFO, a device); each file's size is
checked before it is read (`_MAX_INPUT_BYTES` for task, criteria, tile and skill files; fixtures over
`_MAX_FILE_BYTES` are left out), and text must be UTF-8. A refused input is one `DataError` naming the file and
the rule.

Besides the suite, the import writes ``<suite>.assign.yaml`` (the IF/TC assignment used, in the mapping-file
format, to edit and pass back with ``--assign``) and returns an `ImportSummary` that states every choice.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


from advisor.errors import ConfigError, DataError
from advisor.importers import register_importer
from advisor.importers.tessl_criteria import (FILE_FORMS_TEXT, Item, assign, derived_check, judge_check, read_checklist,
                                              read_mapping, rescale, slug, split_inline_files)
from advisor.nesting import load_json
from advisor.suite import load_suite
from advisor.yamlio import decode_utf8, dump_yaml, read_bounded

DEFAULT_TOOLS = ["list_files", "read_file", "write_file", "run_python"]
CLASS_BY = ("skill", "tile", "capability")
_KNOWN = {"task.md", "criteria.json", "capability.txt", "skill.md", "SKILL.md"}
_MAX_FILE_BYTES = 200_000  #: fixture and skill-document files above this are left out
_MAX_INPUT_BYTES = 2 * 1024 * 1024  #: task.md, criteria.json, tile.json, capability.txt and SKILL.md above this are refused
_SKIP_DIRS = {".git", "node_modules", "__pycache__", ".venv"}


@dataclass
class ImportSummary:
    """What an import produced, and every choice it made."""

    out: Path
    class_by: str = "skill"
    tasks: int = 0
    with_skill: int = 0
    if_criteria: int = 0
    tc_criteria: int = 0
    derived: int = 0  #: criteria given a deterministic check (the forms in FILE_FORMS_TEXT)
    inline_files: int = 0
    skill_docs: int = 0
    rules: dict[str, int] = field(default_factory=dict)  #: IF/TC assignment rule -> criteria
    added: list[str] = field(default_factory=list)  #: "task/checklist" that got an importer-added criterion
    classes: dict[str, int] = field(default_factory=dict)  #: class -> tasks
    assignment_file: Path | None = None

    def lines(self) -> list[str]:
        """The summary as lines for the CLI."""
        out = [f"imported {self.tasks} scenario(s) into {self.out} ({self.with_skill} with a skill)",
               f"classes by {self.class_by}: " + ", ".join(f"{c} ({n})" for c, n in self.classes.items()),
               f"criteria: {self.if_criteria} instruction following, {self.tc_criteria} task completion; "
               "assigned by " + ", ".join(f"{r} {n}" for r, n in sorted(self.rules.items())) +
               f"; the assignment is in {self.assignment_file} (edit it and re-import with --assign)",
               f"deterministic checks derived: {self.derived} (forms: {FILE_FORMS_TEXT}); the other criteria "
               "are graded by the ladder's judge role",
               f"inline FILE blocks -> workspace fixtures: {self.inline_files}; skill files -> documents of the "
               f"with-skill condition: {self.skill_docs}",
               "weights: each criterion keeps its scenario max_score (original_weight); the scenario's own "
               "weighted score is stored beside IF/TC"]
        if self.added:
            out.append(f"added by the importer (one side was empty; no source weight): {len(self.added)}: "
                       + ", ".join(self.added))
        return out


class _Tree:
    """The folder an import was given: every path it reads must resolve inside it."""

    def __init__(self, root: Path):
        self.root = root
        self.real = root.resolve()

    def inside(self, path: Path) -> Path:
        """`path` resolved, when it stays inside the tree; `DataError` naming it and the rule otherwise."""
        real = path.resolve()
        if real != self.real and self.real not in real.parents:
            how = "a symlink that leads" if path.is_symlink() else "a path that leads"
            raise DataError(f"{path}: refused: {how} outside the folder being imported ({self.root}); copy the "
                            "file into the folder instead")
        return real

    def text(self, path: Path, limit: int = _MAX_INPUT_BYTES) -> str:
        """A UTF-8 file of the tree (inside it, regular, within `limit`)."""
        data = read_bounded(self.inside(path), limit, "file", DataError, hint="")
        try:
            return decode_utf8(path, data)
        except ConfigError as exc:
            raise DataError(str(exc)) from None

    def json(self, path: Path) -> Any:
        """A JSON file of the tree."""
        try:
            return load_json(self.text(path), str(path), DataError)
        except ValueError as exc:
            raise DataError(f"{path}: invalid JSON: {exc}") from None


@dataclass
class Tile:
    """A tile folder: its name and its skills (name -> SKILL.md)."""

    root: Path
    name: str
    skills: dict[str, Path]


def read_tile(tile_dir: Path, tree: _Tree | None = None) -> Tile:
    """The tile at `tile_dir`; `DataError` naming tile.json when a skill path is wrong or leads out of the tree
    (default: the tile's own folder)."""
    tree = tree or _Tree(tile_dir)
    where = tile_dir / "tile.json"
    data = tree.json(where)
    if not isinstance(data, dict):
        raise DataError(f"{where}: expected a JSON object")
    skills = data.get("skills", {})
    if isinstance(skills, dict):
        entries = list(skills.items())
    elif isinstance(skills, list):
        entries = [(s.get("name", ""), s) if isinstance(s, dict) else ("", s) for s in skills]
    else:
        raise DataError(f"{where}: skills: expected a mapping or a list")
    found: dict[str, Path] = {}
    for name, entry in entries:
        rel = entry.get("path") if isinstance(entry, dict) else entry
        if not isinstance(rel, str):
            raise DataError(f"{where}: skills.{name or '?'}: no path to its SKILL.md")
        if Path(rel).is_absolute() or ".." in Path(rel).parts:
            raise DataError(f"{where}: skills.{name or rel}: refused: {rel!r} is an absolute or '..' path; give "
                            "a path inside the tile")
        path = tile_dir / rel
        tree.inside(path)
        if path.is_dir():
            path = path / "SKILL.md"
        if not path.is_file():
            raise DataError(f"{where}: skills.{name or rel}: skill file not found: {path}")
        found[name or path.parent.name] = path
    name = slug(str(data.get("name") or tile_dir.name).split("/")[-1])
    if not found and (tile_dir / "SKILL.md").is_file():  # a one-skill tile with SKILL.md at its root
        found[name] = tile_dir / "SKILL.md"
    return Tile(tile_dir, name, found)


def _natural(path: Path) -> list:
    return [int(p) if p.isdigit() else p for p in re.split(r"([0-9]+)", path.as_posix())]


def walk(root: Path, tree: _Tree | None = None) -> list[tuple[Path, Tile | None]]:
    """Every scenario folder under `root` (any depth, natural order) with the nearest tile above it (symlinked
    folders are not followed)."""
    tree = tree or _Tree(root)
    tiles: dict[Path, Tile] = {}
    scenarios: list[Path] = []
    for here, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
        path = Path(here)
        if "tile.json" in files:
            tiles[path] = read_tile(path, tree)
        if "task.md" in files and "criteria.json" in files:
            scenarios.append(path)
    out = []
    for scenario in sorted(scenarios, key=lambda p: _natural(p.relative_to(root))):
        tile = next((tiles[p] for p in [scenario, *scenario.parents] if p in tiles), None)
        out.append((scenario, tile))
    return out


def _text_files(tree: _Tree, folder: Path, skip: set[str], skip_dirs: set[str] = frozenset()) -> dict[str, str]:
    """The small UTF-8 text files under `folder` (symlinked folders not followed): a symlink that leads out of the
    tree, a file that is not regular, over `_MAX_FILE_BYTES` or not UTF-8 is left out."""
    files = {}
    for here, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
        for fname in sorted(names):
            path = Path(here) / fname
            rel = path.relative_to(folder).as_posix()
            parts = Path(rel).parts
            if rel in skip or fname.startswith(".") or parts[0] in skip_dirs:
                continue
            try:  # inside the tree, regular, within the size, UTF-8: `_Tree.text` checks each before reading
                files[rel] = tree.text(path, _MAX_FILE_BYTES)
            except DataError:
                continue
    return dict(sorted(files.items()))


def _pick_skill(scenario: Path, tile: Tile | None, capability: str, text: str) -> tuple[str, Path] | None:
    for name in ("SKILL.md", "skill.md"):
        if (scenario / name).is_file() or (scenario / name).is_symlink():
            return slug(scenario.name), scenario / name
    skills = tile.skills if tile else {}
    if len(skills) == 1:
        return next(iter(skills.items()))
    haystack = f"{capability}\n{text}".lower()
    for name, path in skills.items():
        if name and name.lower() in haystack:
            return name, path
    return None


def _scenario_name(scenario: Path, tile: Tile | None, root: Path) -> str:
    base = tile.root if tile else root
    rel = scenario.relative_to(base) if scenario != base else Path(scenario.name)
    parts = [p for p in rel.parts if p != "evals"] or [scenario.name]
    return "-".join(parts)


def _criteria(items: list[Item], context: str, task_id: str, mapping: dict, summary: ImportSummary):
    sides: dict[str, list[Item]] = {"if": [], "tc": []}
    rules: dict[str, str] = {}
    for item in items:
        side, rule = assign(item, task_id, mapping)
        sides[side].append(item)
        rules[item.name] = side
        summary.rules[rule] = summary.rules.get(rule, 0) + 1
    out = {}
    for side, default in (("if", ("instructions_followed", "The task's explicit instructions are followed.")),
                          ("tc", ("goal_reached", "The task's goal is reached: what it asks for exists and works."))):
        chosen = sides[side]
        crits = []
        names: set[str] = set()
        for item, weight in zip(chosen, rescale([c.max_score for c in chosen]) if chosen else []):
            name = slug(item.name, "_")
            while name in names:
                name += "_2"
            names.add(name)
            check = derived_check(item)
            summary.derived += check is not None
            crits.append({"name": name, "description": item.description or item.name, "weight": weight,
                          "original_weight": item.max_score, "check": check or judge_check(item, context)})
        if not crits:
            summary.added.append(f"{task_id}/{side}")
            rubric = ("Added by the advisor importer, NOT part of the scenario (its checklist had no criterion "
                      "on this side); it carries no scenario weight.")
            crits = [{"name": default[0], "description": default[1], "weight": 100.0,
                      "check": {"type": "judge", "rubric": rubric}}]
        out[side] = crits
    summary.if_criteria += len(out["if"])
    summary.tc_criteria += len(out["tc"])
    return out["if"], out["tc"], rules


def _class_of(class_by: str, tile: Tile | None, skill: tuple[str, Path] | None, capability: str,
              scenario: Path) -> tuple[str, str]:
    """(class name, description) of a scenario under `class_by`."""
    first = capability.splitlines()[0].strip() if capability.strip() else ""
    if class_by == "capability":
        if not first:
            raise DataError(f"{scenario / 'capability.txt'}: missing or empty (--class-by capability needs it)")
        return slug(first, "_"), first
    if class_by == "skill" and skill is not None:
        return slug(skill[0], "_"), f"scenarios run with the skill {skill[0]}"
    if tile is not None:
        return slug(tile.name, "_"), f"scenarios of the tile {tile.name}"
    if first:
        return slug(first, "_"), first
    return slug(scenario.name, "_"), f"scenario folder {scenario.name}"


@register_importer("tessl", produces="suite")
def import_tessl(src: str | Path, out: str | Path, name: str | None = None, class_by: str = "skill",
                 assign_file: str | Path | None = None) -> ImportSummary:
    """Import every Tessl scenario under `src` into the suite file `out` (skills copied beside it).

    Raises `DataError` naming the file when an input is malformed or nothing is found; the written suite is
    validated with `load_suite` before this returns.
    """
    src, out = Path(src), Path(out)
    if class_by not in CLASS_BY:
        raise DataError(f"--class-by {class_by!r}: use one of {', '.join(CLASS_BY)}")
    if not src.is_dir():
        raise DataError(f"{src}: not a folder (expected a Tessl scenario, tile, or a folder of them)")
    tree = _Tree(src)
    units = walk(src, tree)
    if not units:
        raise DataError(f"{src}: no Tessl scenarios found (folders with task.md and criteria.json, at any depth)")
    mapping = read_mapping(Path(assign_file) if assign_file else None)
    summary = ImportSummary(out, class_by)
    classes: dict[str, str] = {}
    tasks, copied, ids, assignment = [], {}, set(), {}
    for scenario, tile in units:
        task_md = scenario / "task.md"
        instructions, inline = split_inline_files(tree.text(task_md), task_md)
        if not instructions.strip():
            raise DataError(f"{task_md}: empty task")
        cap_path = scenario / "capability.txt"
        capability = tree.text(cap_path).strip() if cap_path.exists() or cap_path.is_symlink() else ""
        base = slug(f"{tile.name}-{_scenario_name(scenario, tile, src)}" if tile else
                    _scenario_name(scenario, None, src))
        task_id, n = base, 2
        while task_id in ids:
            task_id, n = f"{base}-{n}", n + 1
        ids.add(task_id)
        picked = _pick_skill(scenario, tile, capability, instructions)
        cls, description = _class_of(class_by, tile, picked, capability, scenario)
        classes.setdefault(cls, description)
        summary.classes[cls] = summary.classes.get(cls, 0) + 1
        items, context = read_checklist(scenario / "criteria.json", tree.json(scenario / "criteria.json"))
        IF, TC, assignment[task_id] = _criteria(items, context, task_id, mapping, summary)
        task: dict[str, Any] = {"id": task_id, "class": cls, "instructions": instructions}
        fixtures: dict[str, Any] = {}
        files = {**_text_files(tree, scenario, _KNOWN), **inline}
        summary.inline_files += len(inline)
        if files:
            fixtures["files"] = files
        if picked:
            skill_name, skill_path = picked
            key = str(skill_path.resolve())
            if key not in copied:
                target = out.parent / "skills" / f"{slug(skill_name)}.md"
                while str(target) in copied.values():
                    target = target.with_name(target.stem + "-2.md")
                copied[key] = str(target)
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(tree.text(skill_path), encoding="utf-8")
            task["skill"] = Path(copied[key]).relative_to(out.parent).as_posix()
            summary.with_skill += 1
            if skill_path.parent != scenario:  # the skill folder may be the tile root: never its evals
                docs = _text_files(tree, skill_path.parent, {skill_path.name, "tile.json"}, {"evals", "skills"}
                                   if tile is not None and skill_path.parent == tile.root else {"evals"})
                if docs:
                    fixtures["skill_docs"] = docs
                    summary.skill_docs += len(docs)
        task["tools"] = list(DEFAULT_TOOLS)
        if fixtures:
            task["fixtures"] = fixtures
        task["instruction_following"] = IF
        task["task_completion"] = TC
        tasks.append(task)
    summary.tasks = len(tasks)
    suite = {"version": 1, "name": slug(name or src.resolve().name),
             "description": f"Imported from the Tessl scenarios in {src} (classes by {class_by}); prose criteria "
                            "are graded by the judge role.",
             "classes": [{"name": c, "description": d} for c, d in classes.items()], "tasks": tasks}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(dump_yaml(suite), encoding="utf-8")
    summary.assignment_file = out.with_suffix(".assign.yaml")
    summary.assignment_file.write_text(
        "# IF/TC assignment used by the import: task id -> {criterion name: if|tc}. Edit and pass back with\n"
        "# `advisor suite import tessl ... --assign THIS_FILE`; a \"*\" key applies to every task.\n"
        + dump_yaml(assignment), encoding="utf-8")
    load_suite(out)
    return summary

"""Import Tessl-style eval scenarios (single scenario folders or whole tiles) into an advisor suite YAML.

Inputs
- A **scenario folder**: ``task.md`` (the instructions), ``criteria.json`` (``{"type": "weighted_checklist",
  "checklist": [{"name", "description", "max_score"}]}``), ``capability.txt`` (what the scenario exercises:
  it becomes the task class) and optionally a skill file (``SKILL.md`` or ``skill.md``). Any other small text
  files in the folder become workspace fixture files.
- A **tile folder**: ``tile.json`` naming each skill and its ``SKILL.md`` (``"skills": {name: {"path": ...}}``,
  or a list of ``{"name", "path"}`` objects or of paths), with scenarios under ``evals/scenario-N/``.
- A folder of scenario folders (or of tiles) is imported as a whole.

Which skill a scenario gets: its own skill file; else, in a tile with one skill, that skill; else the tile
skill whose name appears in the scenario's capability or task text; else none (the task then runs only
without a skill). Skill files are copied to ``skills/`` next to the output suite so it is self-contained.

Criteria are prose, so each becomes a ``judge`` check (graded by the ladder's judge role with the
criterion's description as the rubric).

**The IF/TC split rule.** A criterion goes to *instruction following* when its name or description speaks
of how the work is done (using a named tool, API, library, header, pattern or convention; format, naming,
style, structure; ordering; citing; "instead of", "avoids", "does not", "must") and to *task completion*
when it speaks of what is achieved (works, correct, returns, produces, creates, passes, handles, result,
output). Each keyword found counts one point for its side; ties go to instruction following, because Tessl
criteria mostly test whether the skill's guidance was followed. Weights (``max_score``) are rescaled to sum
to 100 within each checklist. When one side would be empty, it gets a single judge criterion of weight 100
(TC: "the task's goal is reached"; IF: "the task's explicit instructions are followed"), stated as such.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from advisor.errors import DataError

DEFAULT_TOOLS = ["list_files", "read_file", "write_file", "run_python"]
_KNOWN = {"task.md", "criteria.json", "capability.txt", "skill.md", "SKILL.md"}
_MAX_FIXTURE_BYTES = 200_000

_IF_WORDS = ["use", "uses", "using", "follow", "follows", "convention", "format", "formatted", "naming", "named",
             "style", "structure", "header", "headers", "pattern", "idiom", "instead", "avoid", "avoids", "not",
             "never", "must", "should", "cite", "cites", "order", "documented", "approach", "api", "library",
             "guideline", "consistent", "explicit", "prefer", "prefers", "via", "rather"]
_TC_WORDS = ["works", "working", "correct", "correctly", "returns", "produce", "produces", "creates", "created",
             "passes", "pass", "handles", "result", "results", "output", "complete", "completes", "implemented",
             "implements", "succeeds", "functional", "accurate", "valid", "builds", "runs", "answer", "fixed", "goal"]


@dataclass
class ImportSummary:
    """What an import produced."""

    out: Path
    tasks: int = 0
    with_skill: int = 0
    if_criteria: int = 0
    tc_criteria: int = 0
    synthesized: int = 0  #: checklists that got the single stated default criterion
    classes: list[str] = field(default_factory=list)


def slug(text: str, sep: str = "-") -> str:
    """Lower-case id made of letters, digits and `sep`."""
    out = re.sub(r"[^a-z0-9]+", sep, text.lower()).strip(sep)
    return out or "x"


def classify(name: str, description: str) -> str:
    """``if`` or ``tc`` for one prose criterion, by the rule in the module docstring."""
    words = re.findall(r"[a-z]+", f"{name} {description}".lower().replace("_", " "))
    if_points = sum(1 for w in words if w in _IF_WORDS)
    tc_points = sum(1 for w in words if w in _TC_WORDS)
    return "tc" if tc_points > if_points else "if"


def rescale(weights: list[float]) -> list[float]:
    """Weights scaled to sum to exactly 100 (the last absorbs rounding)."""
    total = sum(weights)
    if total <= 0:
        weights, total = [1.0] * len(weights), float(len(weights))
    scaled = [round(100.0 * w / total, 4) for w in weights]
    scaled[-1] = round(100.0 - sum(scaled[:-1]), 4)
    return scaled


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except ValueError as exc:
        raise DataError(f"{path}: invalid JSON: {exc}") from None


def _criteria(path: Path) -> list[dict[str, Any]]:
    data = _read_json(path)
    if not isinstance(data, dict) or data.get("type") != "weighted_checklist":
        raise DataError(f"{path}: expected {{\"type\": \"weighted_checklist\", \"checklist\": [...]}}")
    items = data.get("checklist")
    if not isinstance(items, list) or not items:
        raise DataError(f"{path}: checklist: expected a non-empty list")
    out = []
    for i, item in enumerate(items):
        if not isinstance(item, dict) or "name" not in item:
            raise DataError(f"{path}: checklist[{i}]: each item needs name, description and max_score")
        score = item.get("max_score", 1)
        if not isinstance(score, (int, float)) or isinstance(score, bool) or score <= 0:
            raise DataError(f"{path}: checklist[{i}].max_score: expected a positive number, got {score!r}")
        out.append({"name": str(item["name"]), "description": str(item.get("description", "")), "max_score": float(score)})
    return out


def _checklists(items: list[dict[str, Any]], summary: ImportSummary) -> tuple[list[dict], list[dict]]:
    sides: dict[str, list[dict]] = {"if": [], "tc": []}
    for item in items:
        sides[classify(item["name"], item["description"])].append(item)
    out = {}
    for side, default in (("if", ("instructions_followed", "The task's explicit instructions are followed.")),
                          ("tc", ("goal_reached", "The task's goal is reached: what it asks for exists and works."))):
        chosen = sides[side]
        if not chosen:
            summary.synthesized += 1
            chosen = [{"name": default[0], "description": default[1], "max_score": 1.0}]
        names: set[str] = set()
        crits = []
        for item, weight in zip(chosen, rescale([c["max_score"] for c in chosen])):
            name = slug(item["name"], "_")
            while name in names:
                name += "_2"
            names.add(name)
            crits.append({"name": name, "description": item["description"] or item["name"], "weight": weight,
                          "check": {"type": "judge", "rubric": f"Criterion from the scenario: {item['name']}."}})
        out[side] = crits
    summary.if_criteria += len(out["if"])
    summary.tc_criteria += len(out["tc"])
    return out["if"], out["tc"]


def _tile_skills(tile_dir: Path) -> dict[str, Path]:
    data = _read_json(tile_dir / "tile.json")
    skills = data.get("skills", {}) if isinstance(data, dict) else {}
    found: dict[str, Path] = {}
    entries: list[tuple[str, Any]]
    if isinstance(skills, dict):
        entries = list(skills.items())
    elif isinstance(skills, list):
        entries = [(s.get("name", ""), s) if isinstance(s, dict) else ("", s) for s in skills]
    else:
        raise DataError(f"{tile_dir / 'tile.json'}: skills: expected a mapping or a list")
    for name, entry in entries:
        rel = entry.get("path") if isinstance(entry, dict) else entry
        if not isinstance(rel, str):
            raise DataError(f"{tile_dir / 'tile.json'}: skills.{name or '?'}: no path to its SKILL.md")
        path = tile_dir / rel
        if path.is_dir():
            path = path / "SKILL.md"
        if not path.is_file():
            raise DataError(f"{tile_dir / 'tile.json'}: skills.{name or rel}: skill file not found: {path}")
        found[name or path.parent.name] = path
    return found


def _scenario_dirs(root: Path) -> list[Path]:
    if (root / "task.md").is_file():
        return [root]
    evals = root / "evals"
    base = evals if evals.is_dir() else root
    dirs = [d for d in base.iterdir() if d.is_dir() and (d / "task.md").is_file()]

    def key(d: Path):
        m = re.search(r"(\d+)$", d.name)
        return (int(m.group(1)) if m else 10**9, d.name)

    return sorted(dirs, key=key)


def _fixtures(scenario: Path) -> dict[str, str]:
    files = {}
    for path in sorted(scenario.rglob("*")):
        rel = path.relative_to(scenario).as_posix()
        if not path.is_file() or rel in _KNOWN or path.stat().st_size > _MAX_FIXTURE_BYTES:
            continue
        try:
            files[rel] = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
    return files


def _pick_skill(scenario: Path, tile_skills: dict[str, Path], capability: str, text: str) -> tuple[str, Path] | None:
    for name in ("SKILL.md", "skill.md"):
        if (scenario / name).is_file():
            return slug(scenario.name), scenario / name
    if len(tile_skills) == 1:
        return next(iter(tile_skills.items()))
    haystack = f"{capability}\n{text}".lower()
    for name, path in tile_skills.items():
        if name and name.lower() in haystack:
            return name, path
    return None


def _units(root: Path) -> list[tuple[str, Path, dict[str, Path]]]:
    """(prefix, scenario dir, tile skills) for every scenario under root."""
    if (root / "tile.json").is_file():
        data = _read_json(root / "tile.json")
        prefix = slug(str(data.get("name", root.name)).split("/")[-1]) if isinstance(data, dict) else slug(root.name)
        skills = _tile_skills(root)
        return [(prefix, d, skills) for d in _scenario_dirs(root)]
    if (root / "task.md").is_file():
        return [("", root, {})]
    units = []
    for child in sorted(d for d in root.iterdir() if d.is_dir()):
        if (child / "tile.json").is_file() or (child / "task.md").is_file() or (child / "evals").is_dir():
            units.extend(_units(child))
    return units


def import_tessl(src: str | Path, out: str | Path, name: str | None = None) -> ImportSummary:
    """Import Tessl scenarios or tiles under `src` into the suite file `out` (skills copied beside it).

    Raises `DataError` naming the file when an input is malformed or nothing is found; the written suite is
    validated with `load_suite` before this returns.
    """
    from advisor.suite import load_suite

    src, out = Path(src), Path(out)
    if not src.is_dir():
        raise DataError(f"{src}: not a folder (expected a Tessl scenario, tile, or a folder of them)")
    units = _units(src)
    if not units:
        raise DataError(f"{src}: no Tessl scenarios found (folders with task.md, criteria.json, capability.txt)")
    summary = ImportSummary(out)
    classes: dict[str, str] = {}
    tasks, copied, ids = [], {}, set()
    skill_dir = out.parent / "skills"
    for prefix, scenario, tile_skills in units:
        task_md = scenario / "task.md"
        instructions = task_md.read_text(encoding="utf-8").strip()
        if not instructions:
            raise DataError(f"{task_md}: empty task")
        cap_path = scenario / "capability.txt"
        capability = cap_path.read_text(encoding="utf-8").strip() if cap_path.is_file() else ""
        if not capability:
            raise DataError(f"{cap_path}: missing or empty (it names the task class)")
        cls = slug(capability.splitlines()[0], "_")[:60]
        classes.setdefault(cls, capability.splitlines()[0])
        IF, TC = _checklists(_criteria(scenario / "criteria.json"), summary)
        task_id = slug(f"{prefix}-{scenario.name}" if prefix else scenario.name)
        while task_id in ids:
            task_id += "-2"
        ids.add(task_id)
        task: dict[str, Any] = {"id": task_id, "class": cls, "instructions": instructions + "\n"}
        picked = _pick_skill(scenario, tile_skills, capability, instructions)
        if picked:
            skill_name, skill_path = picked
            key = str(skill_path.resolve())
            if key not in copied:
                target = skill_dir / f"{slug(skill_name)}.md"
                while target.exists() and str(target) in copied.values():
                    target = target.with_name(target.stem + "-2.md")
                copied[key] = str(target)
                skill_dir.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(skill_path, target)
            task["skill"] = Path(copied[key]).relative_to(out.parent).as_posix()
            summary.with_skill += 1
        task["tools"] = list(DEFAULT_TOOLS)
        files = _fixtures(scenario)
        if files:
            task["fixtures"] = {"files": files}
        task["instruction_following"] = IF
        task["task_completion"] = TC
        tasks.append(task)
    summary.tasks = len(tasks)
    summary.classes = sorted(classes)
    suite = {"version": 1, "name": slug(name or src.resolve().name),
             "description": f"Imported from Tessl scenarios in {src}; criteria are graded by the judge role.",
             "classes": [{"name": c, "description": d} for c, d in classes.items()], "tasks": tasks}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(_dump(suite), encoding="utf-8")
    load_suite(out)
    return summary


class _Dumper(yaml.SafeDumper):
    def ignore_aliases(self, data):
        return True


def _str(dumper, value: str):
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


_Dumper.add_representer(str, _str)


def _dump(data: dict) -> str:
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=120)

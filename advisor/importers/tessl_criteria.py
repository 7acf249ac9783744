"""Tessl scenario parts: the weighted checklist, the IF/TC assignment, derived checks and inline input files.

**Weights stay the scenario's.** Each criterion keeps its ``max_score`` as ``original_weight``; within the
advisor's two checklists the weights are rescaled to sum to 100 (the suite contract), and the scorer reports
the scenario's own weighted score (sum of max_score x earned fraction over the total) beside IF and TC.

**The IF/TC assignment** of a criterion, first rule that applies (the rule used is recorded per criterion):

1. ``criterion``: a ``"checklist": "if" | "tc"`` field on the item in ``criteria.json``;
2. ``mapping``: the mapping file (``--assign FILE``, YAML ``{task id or "*": {criterion name: if|tc}}``);
   the importer writes the assignment it used in that very format beside the suite, ready to edit;
3. ``category``: the item's Tessl ``category``: ``INTENT``, ``INTEGRATION``, ``EDGE_CASE`` (what is achieved)
   -> TC; ``DESIGN``, ``MUST_NOT``, ``MINIMALITY``, ``REUSE`` (how the work is done) -> IF;
4. ``keywords``: the keyword rule of `classify` (how the work is done -> IF, what is achieved -> TC; ties IF).

When one side ends up empty the importer adds ONE criterion to it (the suite needs both checklists), with
no source weight (so it does not enter the scenario score), a rubric saying it was added by the importer,
and a line in the import summary.

**Deterministic checks** are derived only where the criterion's text is exactly checkable, in these forms
(the whole name or description, ignoring case and a final full stop): "a file named `X` exists",
"file `X` exists", "creates a file named `X`", "writes `X`". Everything else is a judge check whose rubric
carries the scenario's context.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from advisor.errors import DataError
from advisor.yamlio import read_yaml

_IF_WORDS = {"use", "uses", "using", "follow", "follows", "convention", "format", "formatted", "naming", "named",
             "style", "structure", "header", "headers", "pattern", "idiom", "instead", "avoid", "avoids", "not",
             "never", "must", "should", "cite", "cites", "order", "documented", "approach", "api", "library",
             "guideline", "consistent", "explicit", "prefer", "prefers", "via", "rather"}
_TC_WORDS = {"works", "working", "correct", "correctly", "returns", "produce", "produces", "creates", "created",
             "passes", "pass", "handles", "result", "results", "output", "complete", "completes", "implemented",
             "implements", "succeeds", "functional", "accurate", "valid", "builds", "runs", "answer", "fixed", "goal"}
SIDES = ("if", "tc")
CATEGORY_SIDES = {"intent": "tc", "integration": "tc", "edge_case": "tc", "design": "if", "must_not": "if",
                  "minimality": "if", "reuse": "if"}
_PATH = r"`?([A-Za-z0-9_][A-Za-z0-9_./-]*\.[A-Za-z0-9]+|[A-Za-z0-9_][A-Za-z0-9_./-]*/[A-Za-z0-9_.-]+)`?"
_FILE_FORMS = [re.compile(p, re.I) for p in (
    rf"(?:an? |the )?file (?:named |called )?{_PATH} exists",
    rf"(?:creates|writes|saves) (?:an? |the )?(?:file )?(?:named |called )?{_PATH}",
)]
FILE_FORMS_TEXT = ("'a file named X exists', 'file X exists', 'creates a file named X', 'writes X' "
                   "(the whole name or description)")
_FILE_MARK = re.compile(r"^=+\s*FILE:\s*(\S.*?)\s*=+\s*$")
_END_MARK = re.compile(r"^=+\s*(?:END(?: FILE)?\s*=*)?$", re.I)


def slug(text: str, sep: str = "-") -> str:
    """Lower-case id made of letters, digits and `sep`."""
    out = re.sub(r"[^a-z0-9]+", sep, text.lower()).strip(sep)
    return out or "x"


def classify(name: str, description: str) -> str:
    """``if`` or ``tc`` for one prose criterion by the keyword rule (module docstring)."""
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


@dataclass
class Item:
    """One checklist item of a scenario, as written there."""

    name: str
    description: str
    max_score: float
    side: str | None = None  #: from the item's own "checklist" field
    category: str = ""  #: the item's Tessl category (INTENT, DESIGN, MUST_NOT, ...), if any


def read_checklist(path: Path, data: Any) -> tuple[list[Item], str]:
    """The items and the ``context`` of one ``criteria.json``; `DataError` naming the file when malformed."""
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
        side = item.get("checklist")
        if side is not None and side not in SIDES:
            raise DataError(f"{path}: checklist[{i}].checklist: expected 'if' or 'tc', got {side!r}")
        out.append(Item(str(item["name"]), str(item.get("description", "")), float(score), side,
                        str(item.get("category") or "")))
    context = data.get("context", "")
    return out, context if isinstance(context, str) else str(context)


def read_mapping(path: Path | None) -> dict[str, dict[str, str]]:
    """The IF/TC mapping file: ``{task id or "*": {criterion name: if|tc}}``; `DataError` when malformed."""
    if path is None:
        return {}

    data = read_yaml(path)
    if not isinstance(data, dict):
        raise DataError(f"{path}: expected a mapping of task id (or \"*\") to {{criterion name: if|tc}}")
    for task_id, entries in data.items():
        if not isinstance(entries, dict):
            raise DataError(f"{path}: {task_id}: expected a mapping of criterion name to if|tc")
        for crit, side in entries.items():
            if side not in SIDES:
                raise DataError(f"{path}: {task_id}.{crit}: expected 'if' or 'tc', got {side!r}")
    return {str(k): {str(c): str(s) for c, s in v.items()} for k, v in data.items()}


def assign(item: Item, task_id: str, mapping: dict[str, dict[str, str]]) -> tuple[str, str]:
    """(side, rule) for one item: its field, else the mapping (task, then "*"), its category, the keywords."""
    if item.side:
        return item.side, "criterion"
    for key in (task_id, "*"):
        side = mapping.get(key, {}).get(item.name) or mapping.get(key, {}).get(slug(item.name, "_"))
        if side:
            return side, "mapping"
    side = CATEGORY_SIDES.get(item.category.strip().lower().replace("-", "_"))
    if side:
        return side, "category"
    return classify(item.name, item.description), "keywords"


def derived_check(item: Item) -> dict[str, Any] | None:
    """A deterministic check when the item's text is one of the exactly checkable forms, else None."""
    for text in (item.description, item.name):
        text = text.strip().rstrip(".").strip()
        for form in _FILE_FORMS:
            m = form.fullmatch(text)
            if m:
                return {"type": "file", "path": m.group(1)}
    return None


def judge_check(item: Item, context: str) -> dict[str, Any]:
    """The judge check of one item: its rubric names the scenario criterion and carries the context."""
    rubric = f"Criterion from the scenario: {item.name} (worth {item.max_score:g} of the scenario's points)."
    if context.strip():
        rubric += f"\nScenario context: {context.strip()}"
    return {"type": "judge", "rubric": rubric}


def split_inline_files(text: str, where: Path) -> tuple[str, dict[str, str]]:
    """Instructions without their ``=== FILE: path ===`` blocks, and the blocks as {path: content}.

    A block runs to the next FILE line, a line of ``=`` alone (or ``=== END ===``), or the end of the text;
    in the instructions it is replaced by a line saying the file is in the workspace.
    """
    lines = text.splitlines()
    kept: list[str] = []
    files: dict[str, str] = {}
    current: str | None = None
    body: list[str] = []

    def close() -> None:
        if current is not None:
            files[current] = "\n".join(body).strip("\n") + "\n"

    for line in lines:
        mark = _FILE_MARK.match(line)
        if mark:
            close()
            current, body = re.sub(r"^(\./)+", "", mark.group(1).strip()), []
            if current in files or ".." in Path(current).parts or current.startswith("/"):
                raise DataError(f"{where}: inline FILE block {mark.group(1)!r}: duplicate or unsafe path")
            kept.append(f"(The file `{current}` is in your workspace.)")
            continue
        if current is not None and _END_MARK.match(line):
            close()
            current, body = None, []
            continue
        (body if current is not None else kept).append(line)
    close()
    return "\n".join(kept).strip() + "\n", files

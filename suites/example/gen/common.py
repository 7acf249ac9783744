"""Helpers the example-suite generator uses to write tasks compactly (not part of the advisor package)."""

from __future__ import annotations

from typing import Any

API = "https://api.example.test"
BILLING_KEY = "sk_test_7Hq2LarkspurBilling"
LOGISTICS_KEY = "lk_live_93fd0c2e"
OPS_KEY = "ops_tok_5f21a9"


def crit(name: str, weight: float, check: dict[str, Any], description: str = "") -> dict[str, Any]:
    """One weighted criterion."""
    out = {"name": name, "weight": weight}
    if description:
        out["description"] = description
    out["check"] = check
    return out


def regex(pattern: str, target: str = "final", flags: str = "", must_match: bool = True) -> dict[str, Any]:
    """A regex check."""
    out: dict[str, Any] = {"type": "regex", "target": target, "pattern": pattern}
    if flags:
        out["flags"] = flags
    if not must_match:
        out["must_match"] = False
    return out


def state(method: str, path: str, header: dict | None = None, body: dict | None = None, count: int | None = None,
          must_happen: bool = True) -> dict[str, Any]:
    """A fixture-API state check."""
    out: dict[str, Any] = {"type": "state", "method": method, "path": path}
    if header:
        out["header"] = header
    if body:
        out["body"] = body
    if count is not None:
        out["count"] = count
    if not must_happen:
        out["must_happen"] = False
    return out


def called(tool: str, **arguments: Any) -> dict[str, Any]:
    """A tool_call check."""
    out: dict[str, Any] = {"type": "tool_call", "tool": tool}
    if arguments:
        out["arguments"] = arguments
    return out


def json_eq(path: str, value: Any, target: str = "final") -> dict[str, Any]:
    """A json_equals check."""
    return {"type": "json_equals", "target": target, "path": path, "value": value}


def schema(s: dict[str, Any], target: str = "final") -> dict[str, Any]:
    """A json_schema check."""
    return {"type": "json_schema", "target": target, "schema": s}


def file_check(path: str, contains: str | None = None, exists: bool = True, equals: str | None = None) -> dict[str, Any]:
    """A workspace file check."""
    out: dict[str, Any] = {"type": "file", "path": path}
    if contains is not None:
        out["contains"] = contains
    if equals is not None:
        out["equals"] = equals
    if not exists:
        out["exists"] = False
    return out


def python(path: str, expect: str, args: list[str] | None = None) -> dict[str, Any]:
    """A python check."""
    out: dict[str, Any] = {"type": "python", "path": path, "expect": expect}
    if args:
        out["args"] = args
    return out


def step(tool: str, how: bool = False, **arguments: Any) -> dict[str, Any]:
    """One reference step."""
    out: dict[str, Any] = {"tool": tool, "arguments": arguments}
    if how:
        out["how"] = True
    return out


def http(method: str, path: str, headers: dict | None = None, body: Any = None, how: bool = False) -> dict[str, Any]:
    """A reference http_request step."""
    args: dict[str, Any] = {"method": method, "url": API + path}
    if headers:
        args["headers"] = headers
    if body is not None:
        args["json"] = body
    return step("http_request", how=how, **args)


def route(method: str, path: str, response: Any, require: dict | None = None, status: int = 200) -> dict[str, Any]:
    """A fixture API route."""
    out: dict[str, Any] = {"method": method, "path": path, "response": response}
    if status != 200:
        out["status"] = status
    if require:
        out["require_headers"] = require
    return out


def task(id: str, cls: str, instructions: str, tools: list[str], IF: list[dict], TC: list[dict], steps: list[dict],
         final: str, sloppy: str, wrong: str, skill: str | None = None, files: dict | None = None,
         docs: dict | None = None, api: list | None = None, limits: dict | None = None) -> dict[str, Any]:
    """One task; checks that both checklists sum to 100."""
    for label, checklist in (("instruction_following", IF), ("task_completion", TC)):
        total = sum(c["weight"] for c in checklist)
        if abs(total - 100) > 1e-9:
            raise ValueError(f"{id}: {label} weights sum to {total}")
    out: dict[str, Any] = {"id": id, "class": cls, "instructions": instructions.strip() + "\n"}
    if skill:
        out["skill"] = f"skills/{skill}.md"
    out["tools"] = tools
    fixtures: dict[str, Any] = {}
    if files:
        fixtures["files"] = files
    if docs:
        fixtures["docs"] = docs
    if api:
        fixtures["api"] = api
    if fixtures:
        out["fixtures"] = fixtures
    if limits:
        out["limits"] = limits
    out["instruction_following"] = IF
    out["task_completion"] = TC
    out["reference"] = {"steps": steps, "final": final, "final_sloppy": sloppy, "final_wrong": wrong}
    return out

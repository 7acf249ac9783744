"""A suite from captured live traffic: each captured step becomes a task that replays it on every rung.

``advisor suite from-traffic --store URL [--since 7d] [--tenant T] --out DIR`` reads the steps the service
captured (`advisor.service.records.capture`, table ``captured_steps``) and writes an ordinary suite:

- **one task per step**, in the class the service assigned (``unclassified`` when it assigned none), whose
  ``replay`` block holds the conversation up to the step as the service rendered it (tool results as they were
  recorded: no live tool runs when it is replayed, `advisor.agent.replay`) and the request's sampling parameters
  (a replay draws as the live request did: its seed, or none);
- **deduplicated**: steps with the same conversation are one task (the first with a usable reference);
- **checked**, in this order, by the class's verifier where the service config (``--config``) gives one and it
  judges the step as the service does (a final answer; a tool call only when a check looks at calls:
  `advisor.verifier.base.judges`): its reply checks, or its judge rubric; else by **equivalence with the reference**, the reply the service delivered
  and accepted live (the same tools with equivalent arguments, or the same final answer: `advisor.checks.replay`);
  a step with neither (its live reply was broken, cut or rejected, and its class has no verifier) is left out,
  because **a broken step is never a reference**. Instruction following is the step's form (``same_step``
  ``part: form``: a well-formed step, a call when one was demanded);
- **split**: a share of sessions (``--heldout``, default 20%, by a hash of the session id, so a session's steps
  stay together) goes to ``heldout.yaml`` beside ``suite.yaml``, for checking a router trained on the rest;
- with ``traffic.json``: the window, the tenants, tasks per class and check, and the steps left out and why.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from advisor.errors import ConfigError
from advisor.importers import register_importer
from advisor.verifier.build import TOOL_STEP_CHECKS
from advisor.yamlio import dump_yaml

HELDOUT = 0.2
UNCLASSIFIED = "unclassified"
#: the rubric of a final answer judged against the served one (`judge_finals`), followed by that answer
JUDGE_RUBRIC = ("The answer says in substance what this accepted answer to the same conversation says (the same facts, "
                "values and ids; wording, order and length may differ). The accepted answer:\n")
STEP_LIMITS = {"max_turns": 1, "max_tokens": 60_000, "timeout_s": 120.0, "max_invalid": 1}
_NAME = re.compile(r"[^A-Za-z0-9_.-]+")


@dataclass
class TrafficSummary:
    """What `suite_from_traffic` wrote and left out."""

    out: Path
    steps: int = 0  #: captured steps read
    tasks: dict[str, int] = field(default_factory=dict)  #: split -> tasks written
    classes: dict[str, int] = field(default_factory=dict)
    checks: dict[str, int] = field(default_factory=dict)  #: verifier | reference | judge -> tasks
    left_out: dict[str, int] = field(default_factory=dict)  #: reason -> steps
    tenants: list[str] = field(default_factory=list)
    first: str | None = None
    last: str | None = None
    files: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        """The summary as JSON data (written to ``traffic.json``)."""
        return {"steps": self.steps, "tasks": self.tasks, "classes": self.classes, "checks": self.checks,
                "left_out": self.left_out, "tenants": self.tenants, "window": [self.first, self.last],
                "files": self.files}

    def lines(self) -> list[str]:
        """What the command prints."""
        out = [f"{self.steps} captured steps ({', '.join(self.tenants) or 'no tenant'}; {self.first or '-'} to "
               f"{self.last or '-'}) -> {sum(self.tasks.values())} tasks: "
               + ", ".join(f"{n} {split}" for split, n in self.tasks.items())]
        out.append("  classes: " + (", ".join(f"{c} {n}" for c, n in sorted(self.classes.items())) or "none"))
        out.append("  checked by: " + (", ".join(f"{c} {n}" for c, n in sorted(self.checks.items())) or "nothing"))
        for reason, n in sorted(self.left_out.items()):
            out.append(f"  left out: {n} {reason}")
        out.extend(f"  wrote {f}" for f in self.files)
        return out


def _slug(text: str) -> str:
    return _NAME.sub("-", text).strip("-.") or "x"


def _share(key: str) -> float:
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") / 2 ** 64


def _instructions(conversation: dict[str, Any]) -> str:
    turns = conversation.get("turns") or []
    users = [t.get("text") or "" for t in turns if t.get("role") == "user"]
    text = (users[-1] if users else "\n".join(t.get("text") or "" for t in turns)).strip()
    return text or "(a replayed step)"


def _class_checks(verifier, tool_step: bool) -> tuple[str, list[dict[str, Any]]] | None:
    """(check kind, task-completion criteria) from a service class's verifier, or None without one or when the
    verifier does not judge this step (a tool-call step, and no check of the verifier's looks at calls: the
    service's own scope, `advisor.verifier.base.judges`)."""
    if verifier is None:
        return None
    if tool_step and not any(c.type in TOOL_STEP_CHECKS for c in verifier.checks):
        return None
    if verifier.checks:
        specs = [c.model_dump(mode="json", by_alias=True) for c in verifier.checks]
        return "verifier", [{"name": f"verifier-{i + 1}-{s['type']}", "weight": 100 / len(specs), "check": s}
                            for i, s in enumerate(specs)]
    if verifier.judge is not None:
        return "verifier", [{"name": "verifier-judge", "weight": 100, "check": {
            "type": "judge", "rubric": verifier.judge.rubric}}]
    return None


def _task(row: dict[str, Any], conversation: dict[str, Any], reply: dict[str, Any], task_class: str,
          checked: tuple[str, list[dict[str, Any]]]) -> dict[str, Any]:
    kind, completion = checked
    reference = ({"calls": reply.get("calls") or [], "final": reply.get("final")} if row["reference_ok"] else None)
    sampling = conversation.pop("sampling", None) or {}
    replay = {"conversation": conversation, "sampling": sampling, "served_by": row.get("rung") or "", "decision_id": row["decision_id"],
              "session_id": row.get("session_id"), "session_step": row.get("session_step"),
              "tenant": row["tenant"], "check": kind, "reference": reference}
    return {"id": f"{_slug(task_class)}-{row['decision_id'].removeprefix('dec_')[:12]}", "class": task_class,
            "instructions": _instructions(conversation), "limits": {"max_turns": 1},
            "instruction_following": [{"name": "well-formed step", "weight": 100,
                                       "check": {"type": "same_step", "part": "form"}}],
            "task_completion": completion, "replay": replay}


def _stamp(value: Any) -> str | None:
    if value is None:
        return None
    return value.isoformat(timespec="seconds") if isinstance(value, datetime) else str(value)


@register_importer("traffic", produces="suite")
def suite_from_traffic(store, out: str | Path, *, since: datetime | None = None, tenant: str | None = None,
                       service_config=None, heldout: float = HELDOUT, name: str | None = None,
                       judge_finals: bool = False, all_tenants: bool = False) -> TrafficSummary:
    """Write the suite of the steps `store` captured (of `tenant`, since `since`) to folder `out` (see the module
    docstring); `service_config` (a `ServiceConfig`) gives the classes' verifiers; with `judge_finals` a final
    answer is checked by the ladder's judge against the served answer instead of by equal text. Without a
    `tenant`, steps of several tenants are mixed in one suite only with `all_tenants` (ConfigError otherwise: one
    team's conversations would become tasks another team's probe and report show)."""
    out = Path(out)
    rows = store.captured_steps(tenant=tenant, since=since)
    tenants = sorted({r["tenant"] for r in rows})
    if tenant is None and len(tenants) > 1 and not all_tenants:
        raise ConfigError(f"the captured steps are of {len(tenants)} tenants ({', '.join(tenants[:10])}"
                          f"{', ...' if len(tenants) > 10 else ''}): give --tenant NAME for one tenant's suite, or "
                          f"--all-tenants to mix them in one")
    summary = TrafficSummary(out, steps=len(rows))
    if rows:
        summary.first, summary.last = _stamp(rows[0]["created_at"]), _stamp(rows[-1]["created_at"])
    summary.tenants = tenants
    left, seen = Counter(), set()
    splits: dict[str, list[dict[str, Any]]] = {"suite": [], "heldout": []}
    for row in sorted(rows, key=lambda r: (not r["reference_ok"], r["created_at"], r["decision_id"])):
        conversation, reply = json.loads(row["request_json"]), json.loads(row["reply_json"])
        key = hashlib.sha256(row["request_json"].encode()).hexdigest()
        if key in seen:
            left["duplicates (the same conversation as another step)"] += 1
            continue
        task_class = row.get("task_class") or UNCLASSIFIED
        verifier = service_config.class_config(task_class).verifier if service_config is not None else None
        checked = _class_checks(verifier, tool_step=bool(reply.get("calls")) and reply.get("final") is None)
        if checked is None and row["reference_ok"] and judge_finals and reply.get("final") is not None \
                and not reply.get("calls"):
            checked = ("judge", [{"name": "equivalent to the served answer", "weight": 100, "check": {
                "type": "judge", "rubric": JUDGE_RUBRIC + str(reply["final"])}}])
        if checked is None and row["reference_ok"]:
            checked = ("reference", [{"name": "same step as served", "weight": 100,
                                      "check": {"type": "same_step", "part": "content"}}])
        if checked is None:
            left["without a check (the live reply was broken, cut or rejected, and the class has no verifier)"] += 1
            continue
        seen.add(key)
        split = "heldout" if _share(row.get("session_id") or row["decision_id"]) < heldout else "suite"
        splits[split].append(_task(row, conversation, reply, task_class, checked))
        summary.checks[checked[0]] = summary.checks.get(checked[0], 0) + 1
        summary.classes[task_class] = summary.classes.get(task_class, 0) + 1
    summary.left_out = dict(left)
    out.mkdir(parents=True, exist_ok=True)
    base = _slug(name or f"traffic-{tenant or 'all'}")
    for split, tasks in splits.items():
        summary.tasks[split] = len(tasks)
        path = out / f"{split}.yaml"
        if not tasks:
            path.unlink(missing_ok=True)
            continue
        tasks.sort(key=lambda t: t["id"])
        classes = sorted({t["class"] for t in tasks})
        suite = {"version": 1, "name": base if split == "suite" else f"{base}-heldout",
                 "description": (f"{len(tasks)} live steps captured by advisor serve ({summary.first} to "
                                 f"{summary.last}), replayed on every rung; written by advisor suite from-traffic"),
                 "limits": STEP_LIMITS,
                 "classes": [{"name": c, "verifier": service_config is not None and
                              service_config.class_config(c).verifier is not None} for c in classes],
                 "tasks": tasks}
        path.write_text(dump_yaml(suite), encoding="utf-8")
        summary.files.append(str(path))
    (out / "traffic.json").write_text(json.dumps(summary.to_json(), indent=2) + "\n", encoding="utf-8")
    summary.files.append(str(out / "traffic.json"))
    return summary

"""A stand-in agent: reads the rendered conversation, works out where it is, and writes its next reply.

The reply is the next action of the episode plan (`advisor.standin.behaviour.make_plan`), written in the
rung's own tool-call format, or a final answer after ``FINAL ANSWER:``. The prompt is read with the default
chat template (stand-in rungs have no `tokenizer_path`); when it cannot be parsed that way the stand-in still
finds the task by searching the prompt for known instructions, and starts from the first step. A plain chat
prompt about no known task gets a generic, labelled simulated reply (`advisor.standin.generic`), or the JSON its
system prompt asks for; a conversation with tools that are no known task's is worked on those tools
(`advisor.standin.tooluse`).
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any, Sequence

from advisor.agent.chat import parse_default
from advisor.agent.formats import FINAL_MARKER, format_for
from advisor.errors import ConfigError
from advisor.records import text_hash
from advisor.standin.behaviour import GIVE_UP_TEXT, Action, make_plan
from advisor.standin.arguments import Context
from advisor.standin.generic import generic_reply, is_agent_prompt
from advisor.standin.tooluse import Step, ToolUser, asked_json, json_answer
from advisor.suite import load_suite


def known_tasks(path: str | Path) -> tuple[Any, ...]:
    """The tasks of the suite at `path` a stand-in acts on (a captured live step is answered as live traffic was:
    tooluse, generic). Read once per version of the suite file: every rung of a ladder knows the same suites."""
    try:
        stat = Path(path).stat()
    except OSError:  # load_suite says what is wrong with the path
        return _known_tasks(str(path), -1, -1)
    return _known_tasks(str(Path(path).resolve()), stat.st_mtime_ns, stat.st_size)


@functools.lru_cache(maxsize=8)
def _known_tasks(path: str, mtime_ns: int, size: int) -> tuple[Any, ...]:
    return tuple(task for task in load_suite(path).tasks if task.replay is None)


class StandinAgent:
    """The simulated agent behind one stand-in model."""

    def __init__(self, model: Any, suite_paths: Sequence[str | Path] = ()):
        if model.standin is None:
            raise ConfigError(f"model {model.name!r} has no standin: block; only stand-ins can be simulated")
        self.model = model
        self.params = model.standin
        self.format = format_for(model.tool_call_format)
        self.tools = ToolUser(model.name, self.params.capability, self.params.seed, self.format)
        self.tasks: dict[str, Any] = {}
        for path in suite_paths:
            for task in known_tasks(path):
                self.tasks.setdefault(text_hash(task.instructions), task)

    # ----------------------------------------------------------------- reading the prompt
    def read(self, prompt: str) -> tuple[Any | None, bool, list[dict[str, str]]]:
        """(task or None, skill in the system prompt, messages after the instructions)."""
        messages = parse_default(prompt)
        task = None
        users = [m for m in messages if m["role"] == "user"]
        if users:
            task = self.tasks.get(text_hash(users[0]["content"]))
        if task is None:  # not the default template, or edited instructions: search the text
            task = next((t for t in self.tasks.values() if t.instructions.strip() in prompt), None)
        system = messages[0]["content"] if messages and messages[0]["role"] == "system" else prompt
        skill = bool(task is not None and task.skill_text and task.skill_text.strip() in system)
        first_user = next((i for i, m in enumerate(messages) if m["role"] == "user"), len(messages))
        return task, skill, messages[first_user + 1:]

    def history(self, turns: list[dict[str, str]]) -> list[tuple[str, str | None, str]]:
        """Its own earlier replies parsed with its format: (kind, tool name, following observation)."""
        out = []
        for i, m in enumerate(turns):
            if m["role"] != "assistant":
                continue
            parsed = self.format.parse(m["content"])
            obs = turns[i + 1]["content"] if i + 1 < len(turns) else ""
            out.append((parsed.kind, parsed.name, obs))
        return out

    # ----------------------------------------------------------------- replying
    def reply(self, prompt: str, sampling: dict[str, Any]) -> str:
        """The next reply of the episode this prompt belongs to."""
        return self.generate(prompt, sampling).text

    def generate(self, prompt: str, sampling: dict[str, Any]) -> Step:
        """The next reply, and whether the stand-in cut it itself (a truncated call: finish reason ``length``)."""
        task, skill, turns = self.read(prompt)
        if task is None:
            messages = parse_default(prompt)
            system = "\n".join(m["content"] for m in messages if m["role"] == "system")
            users = [m["content"] for m in messages if m["role"] == "user"]
            if users and not is_agent_prompt(system):  # a plain chat request
                schema = asked_json(system)
                if schema is not None:
                    return Step(json.dumps(json_answer(schema, Context(users[-1]))))
                return Step(generic_reply(self.model.name, users[-1]))
            if users:  # tools it does not know a suite task for: act on them (`advisor.standin.tooluse`)
                return self.tools.step(prompt, messages, sampling.get("seed"))
        done = self.history(turns)
        condition = "skill" if skill else "baseline"
        plan = make_plan(self.params, task, skill, sampling.get("seed"), condition)
        action = plan.action_at(len(done))
        return Step(self.write(action, len(done)))

    def write(self, action: Action, position: int) -> str:
        """An action as text in the rung's format."""
        if action.kind == "final":
            return f"I have what I need.\n{FINAL_MARKER} {action.text or GIVE_UP_TEXT}"
        call = self.format.render_call(action.name, action.arguments)
        if action.kind == "malformed":
            call = call[: max(len(call) * 2 // 3, 12)]  # an unclosed call: the loop reports a parse error
        lead = "Let me start" if position == 0 else "Next"
        return f"{lead}: I will use {action.name}.\n{call}"

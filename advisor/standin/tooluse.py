"""A stand-in acting on tools it does not know: any request whose tools are not a known suite task's.

What ``advisor serve`` sends a stand-in rung on behalf of an agent framework is a conversation with the client's
own tools (rendered into the system prompt by the rung's tool-call format). The stand-in reads it back as a model
would and works it with fixed rules, then makes its rung's mistakes at the rates of its calibrated parameters
(`advisor.standin.behaviour`: capability ``c``, the same difficulty, convergence and slip constants):

1. **Which tools**: the offered tools whose name shares a word with the user's message (``refund_order`` for
   "refund order ORD-1042"; by description words when no name matches), at most ``MAX_CALLS``, look-ups
   (``get_``, ``find_``, ``search_``...) before changes, each in the order the message names it.
2. **Arguments** for each call from its JSON schema and the conversation so far (`advisor.standin.arguments`):
   values from the user's message and from earlier tool results, so a refund takes the amount the order
   look-up returned.
   Two look-ups in a row whose arguments both come from the user's message (`given_by_message`: the second needs
   no result of the first) are written in one reply, as two calls; a call that needs an earlier result waits
   for it.
3. **Answer** after the last call: a short plain-text summary of the results, labelled ``[SIMULATED <rung>]``,
   or, when the system prompt asks for JSON (a schema, or a JSON object), the JSON alone, filled the same way.
   A tool that fails twice in a row ends the episode with an answer that says so.

The rung's failure modes, per **episode** (a conversation: rung seed, first and last user message, the tools,
the request's ``seed``): it converges with ``p_conv = sigmoid(A * (c - d))`` for the difficulty ``d`` of the
planned calls (`difficulty_of`); otherwise, after 0-2 good calls, it gives up, loops on one call, or keeps
writing a broken call (malformed, truncated at the end of its reply, or with arguments that do not validate),
weights ``W_GIVE_UP / W_LOOP / W_MALFORMED`` (the broken kinds share the last weight equally). Such an episode
fails the same way however often the step is retried on the rung. Per **step**, with probability
``SLIP * sigmoid(-c)``, one reply is broken the same three ways; that draw also depends on how often the rung
has already answered this exact prompt, so a retry of the step usually succeeds. Everything is deterministic
for the same sequence of requests.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Sequence

from advisor.agent.formats import FINAL_MARKER
from advisor.standin.arguments import Context, decode, fill, fill_object, invalid, named_in_message, words
from advisor.standin.generic import generic_reply
from advisor.standin.behaviour import DS, D0, DT, GIVE_UP_TEXT, SLIP, W_GIVE_UP, W_LOOP, W_MALFORMED, sigmoid, A

MAX_CALLS = 3  #: calls planned at most per episode
ERROR_RETRIES = 1  #: a failing tool is called again this many times before the stand-in says it failed
_READ_VERBS = {"get", "lookup", "look", "find", "search", "list", "read", "fetch", "check", "query", "retrieve",
               "show", "describe", "view", "lookup", "status", "info"}
_STOP = {"a", "an", "the", "and", "or", "to", "of", "for", "in", "on", "it", "is", "be", "by", "with", "from",
         "get", "set", "do", "run", "call", "use", "make", "tool", "function", "api", "this", "that", "me", "my",
         "please", "then", "all", "any", "its", "at", "as", "if", "into", "you", "your", "i", "we", "our"}
_TOOL_ERROR = re.compile(r"^\s*[{\[]?\s*\"?(error|exception|traceback)\b|\bHTTP [45]\d\d\b|an error occurred|"
                         r"\bnot found\b|\bfailed\b", re.I)
_CLIP = 160
_SEEN_MAX = 4096


@dataclass(frozen=True)
class Tool:
    """One offered tool as read back from the system prompt."""

    name: str
    description: str
    parameters: dict


# ----------------------------------------------------------------------------- reading the prompt
def _xml_tools(block: str) -> list[Tool]:
    tools = []
    for func in re.findall(r"<function>(.*?)</function>", block, re.S):
        name = re.search(r"<name>(.*?)</name>", func, re.S)
        if not name:
            continue
        desc = re.search(r"<description>(.*?)</description>", func.split("<parameters>")[0], re.S)
        props, required = {}, []
        for param in re.findall(r"<parameter>(.*?)</parameter>", func, re.S):
            fields = dict(re.findall(r"<(\w+)>(.*?)</\1>", param, re.S))
            if "name" not in fields:
                continue
            spec: dict[str, Any] = {"type": fields.get("type", "string")}
            text = fields.get("description", "")
            if text.endswith("(required)"):
                required.append(fields["name"])
                text = text[: -len("(required)")].strip()
            spec["description"] = text
            for key, raw in fields.items():  # any further schema keyword (enum, items, format, ...)
                if key not in ("name", "type", "description"):
                    try:
                        spec[key] = json.loads(raw)
                    except ValueError:
                        spec[key] = raw.strip()
            props[fields["name"]] = spec
        tools.append(Tool(name.group(1).strip(), desc.group(1).strip() if desc else "",
                          {"type": "object", "properties": props, "required": required}))
    return tools


def _json_tool(obj: Any) -> Tool | None:
    if isinstance(obj, dict) and isinstance(obj.get("function"), dict):
        obj = obj["function"]
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    params = obj.get("parameters") if isinstance(obj.get("parameters"), dict) else {"type": "object", "properties": {}}
    return Tool(obj["name"], str(obj.get("description") or ""), params)


def offered_tools(system: str) -> list[Tool]:
    """The tools a system prompt offers, in any of the formats' tool lists (`advisor.agent.formats`)."""
    found = re.search(r"<AVAILABLE_TOOLS>(.*?)</AVAILABLE_TOOLS>", system, re.S)
    if found:
        try:
            return [t for t in map(_json_tool, json.loads(found.group(1))) if t]
        except ValueError:
            return []
    blocks = re.findall(r"<tools>(.*?)</tools>", system, re.S)  # hermes names the empty tags before the list
    block = max(blocks, key=len, default="")
    if "<function>" in block:
        return _xml_tools(block)
    tools = []
    for line in block.splitlines():
        try:
            tool = _json_tool(json.loads(line))
        except ValueError:
            continue
        if tool:
            tools.append(tool)
    return tools


def without_tool_list(system: str) -> str:
    """The system prompt without its tool list and the format's calling instructions (what the client wrote):
    every sentence about calling tools or functions is left out."""
    text = re.sub(r"<AVAILABLE_TOOLS>.*?</AVAILABLE_TOOLS>|<tools>.*?</tools>|<tool_call>.*?</tool_call>", "",
                  system, flags=re.S)
    sentences = re.split(r"(?<=[.!?])\s+|\n", text)
    return " ".join(x for x in sentences if not re.search(r"tool|function|\bcall", x, re.I))


def asked_json(system: str) -> dict | None:
    """The JSON answer the system prompt asks for: its JSON Schema, ``{}`` for any JSON object, None for none."""
    text = without_tool_list(system)
    if not re.search(r"\bJSON\b", text, re.I):
        return None
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", text):
        try:
            obj, _ = decoder.raw_decode(text, match.start())
        except ValueError:
            continue
        if isinstance(obj, dict):
            schema = obj.get("schema") if isinstance(obj.get("schema"), dict) else obj
            if "properties" in schema or schema.get("type") == "object":
                return schema
    if re.search(r"\b(reply|respond|answer|output|return)\b[^.\n]{0,60}\bJSON\b", text, re.I):
        return {}
    return None


def _stem(word: str) -> str:
    for suffix, repl in (("ies", "y"), ("ing", ""), ("ed", ""), ("s", "")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)] + repl
    return word


def _terms(text: str) -> list[str]:
    return [_stem(w) for w in words(text) if w not in _STOP]


def is_read(tool: Tool) -> bool:
    """A look-up by its name's first word (get_order, search_docs), done before changes."""
    first = (words(tool.name) or [""])[0]
    return first in _READ_VERBS


def choose_tools(tools: Sequence[Tool], user_text: str) -> list[Tool]:
    """The tools the message asks for: name words in the message (else description words, two or more),
    look-ups first, in the order the message names them; at most `MAX_CALLS`."""
    said = _terms(user_text)
    where = {w: i for i, w in reversed(list(enumerate(said)))}

    def first_mention(terms: list[str]) -> int | None:
        hits = [where[t] for t in terms if t in where]
        return min(hits) if hits else None

    picked = [(t, first_mention(_terms(t.name))) for t in tools]
    picked = [(t, at) for t, at in picked if at is not None]
    if not picked:
        for t in tools:
            shared = set(_terms(t.description)) & set(said)
            if len(shared) >= 2:
                picked.append((t, min(where[s] for s in shared)))
    picked.sort(key=lambda p: (not is_read(p[0]), p[1]))
    return [t for t, _ in picked[:MAX_CALLS]]


def given_by_message(tool: Tool, user_text: str) -> bool:
    """Whether every required argument of a call comes from the user's message (a value the message names, or
    the message itself for a query), so the call needs no earlier result and can go beside another."""
    ctx = Context(user_text, [])
    arguments = fill_object(tool.parameters, ctx)
    required = [k for k in tool.parameters.get("required") or [] if isinstance(k, str)]
    return all(named_in_message(key, arguments.get(key), ctx) for key in required)


def difficulty_of(calls: Sequence[Tool]) -> float:
    """The difficulty of an episode that makes these calls (the suites' rule: steps and distinct tools)."""
    return D0 + DS * max(1, len(calls)) + DT * max(len({t.name for t in calls}) - 1, 0)


def is_tool_error(result: str) -> bool:
    """A tool result that reports a failure (error text, an HTTP 4xx/5xx, a framework's error message)."""
    return bool(_TOOL_ERROR.search(result[:300]))


# ----------------------------------------------------------------------------- the episode
@dataclass(frozen=True)
class ToolEpisode:
    """The episode-level draws: whether it converges, and if not how and after how many good calls it fails."""

    outcome: str  #: converge | give_up | loop | malformed | truncated | bad_args
    fail_at: int = 0


def draw_episode(capability: float, calls: Sequence[Tool], seed: int) -> ToolEpisode:
    """The episode's draws from its seed (see the module docstring)."""
    rng = random.Random(seed)
    if rng.random() < sigmoid(A * (capability - difficulty_of(calls))):
        return ToolEpisode("converge")
    mode = rng.choices(["give_up", "loop", "broken"], [W_GIVE_UP, W_LOOP, W_MALFORMED])[0]
    if mode == "broken":
        mode = rng.choice(["malformed", "truncated", "bad_args"])
    return ToolEpisode(mode, rng.randint(0, max(0, min(2, len(calls) - 1))))


def _seed(*parts: Any) -> int:
    key = "\x1f".join(str(p) for p in parts).encode()
    return int.from_bytes(hashlib.sha256(key).digest()[:8], "big")


@dataclass(frozen=True)
class Step:
    """What the stand-in writes: a reply text, and whether it stopped because its output was cut."""

    text: str
    cut: bool = False


class ToolUser:
    """The tool-using behaviour of one stand-in rung (its name, capability, seed and tool-call format)."""

    def __init__(self, rung: str, capability: float, seed: int, fmt: Any):
        self.rung, self.capability, self.seed, self.format = rung, capability, seed, fmt
        self._seen: OrderedDict[str, int] = OrderedDict()
        self._lock = threading.Lock()

    def _repeat(self, prompt: str, request_seed: Any) -> int:
        """How often this rung already answered this exact prompt (a retry of the step)."""
        key = hashlib.sha256(f"{request_seed}\x1f{prompt}".encode()).hexdigest()
        with self._lock:
            count = self._seen.pop(key, -1) + 1
            self._seen[key] = count
            while len(self._seen) > _SEEN_MAX:
                self._seen.popitem(last=False)
        return count

    def step(self, prompt: str, messages: list[dict[str, str]], request_seed: Any) -> Step:
        """The next reply in the conversation `messages` (parsed from `prompt`)."""
        system = "\n".join(m["content"] for m in messages if m["role"] == "system")
        tools = offered_tools(system)
        users = [i for i, m in enumerate(messages) if m["role"] == "user" and not _is_result(m["content"])]
        last_user = users[-1] if users else len(messages)
        user_text = messages[last_user]["content"] if users else ""
        first_text = messages[users[0]]["content"] if users else ""
        made = self._calls(messages[last_user + 1:], tools)
        results = [obs for _, _, obs in self._calls(messages, tools) if obs is not None]
        ctx = Context("\n".join(dict.fromkeys([first_text, user_text])), results)
        plan = choose_tools(tools, user_text)
        if not plan and tools and re.search(r"You must call", system):
            plan = [tools[0]]
        episode_key = (self.seed, first_text, user_text, [t.name for t in tools], request_seed)
        episode = draw_episode(self.capability, plan, _seed(*episode_key))
        done = [name for name, _, obs in made if obs is not None and not is_tool_error(obs)]
        progress = sum(1 for t in plan if t.name in done)
        slip = random.Random(_seed(*episode_key, len(made), self._repeat(prompt, request_seed)))
        broken = None
        if slip.random() < SLIP * sigmoid(-self.capability):
            broken = slip.choice(["malformed", "truncated", "bad_args"])
        if episode.outcome != "converge" and progress >= episode.fail_at:
            if episode.outcome == "give_up":
                return self._final(GIVE_UP_TEXT)
            if episode.outcome == "loop" and made:
                name, args, _ = made[-1]
                return Step(self.format.render_call(name, args))
            if episode.outcome != "loop":
                broken = episode.outcome
        if made and made[-1][2] is not None and is_tool_error(made[-1][2]):
            name, args, obs = made[-1]
            errors = 0
            for n, _, o in reversed(made):
                if n != name or o is None or not is_tool_error(o):
                    break
                errors += 1
            if errors > ERROR_RETRIES:
                return self._final(f"I could not complete the task: {name} failed ({_clip(obs)}).")
            return self._call(next((t for t in tools if t.name == name), Tool(name, "", {})), ctx, broken, args)
        todo = [t for t in plan if t.name not in done]
        if len(todo) >= 2 and is_read(todo[0]) and is_read(todo[1]) and given_by_message(todo[1], user_text):
            first, second = self._call(todo[0], ctx, None), self._call(todo[1], ctx, broken)
            return Step(f"{first.text}\n{second.text}", cut=second.cut)  # a slip falls on the last call
        if todo:
            return self._call(todo[0], ctx, broken)
        return self._answer(system, ctx, made, user_text)

    # ------------------------------------------------------------------------- reading its own turns
    def _calls(self, turns: list[dict[str, str]], tools: Sequence[Tool]) -> list[tuple[str, dict, str | None]]:
        """Its earlier calls in `turns`: (tool, arguments, the result that followed or None); the calls of one
        reply take the results that follow it in order."""
        specs = [{"name": t.name, "description": t.description, "parameters": t.parameters} for t in tools]
        out = []
        for i, m in enumerate(turns):
            if m["role"] != "assistant":
                continue
            parsed = self.format.parse(m["content"], specs)
            if parsed.kind != "call":
                continue
            results = []
            for following in turns[i + 1:]:
                if not (following["role"] == "tool" or _is_result(following["content"])):
                    break
                results.append(_unwrap(following["content"]))
            for n, (name, arguments) in enumerate(parsed.calls or [(parsed.name, parsed.arguments)]):
                out.append((name, dict(arguments), results[n] if n < len(results) else None))
        return out

    # ------------------------------------------------------------------------- writing
    def _call(self, tool: Tool, ctx: Context, broken: str | None, arguments: dict | None = None) -> Step:
        args = dict(arguments) if arguments is not None else fill_object(tool.parameters, ctx)
        if broken == "bad_args":
            args = invalid(args, tool.parameters)
        text = self.format.render_call(tool.name, args)
        if broken == "truncated":
            return Step(text[: max(len(text) * 2 // 3, 12)], cut=True)
        if broken == "malformed":
            return Step(_malformed(text, self.format))
        return Step(text)

    def _final(self, text: str) -> Step:
        return Step(f"{FINAL_MARKER} {text}")

    def _answer(self, system: str, ctx: Context, made: list, user_text: str) -> Step:
        schema = asked_json(system)
        if schema is not None:
            return self._final(json.dumps(json_answer(schema, ctx)))
        if not made:
            return self._final(generic_reply(self.rung, user_text))
        said = "; ".join(f"{name} returned {_clip(obs or '')}" for name, _, obs in made)
        return self._final(f"[SIMULATED {self.rung}] Done. {said}")


def json_answer(schema: dict, ctx: Context) -> Any:
    """The JSON answer: `schema` filled from the conversation, or for any JSON object the last result's fields."""
    if schema:
        return fill(schema, ctx, "answer")
    last = decode(ctx.results[-1]) if ctx.results else None
    if isinstance(last, dict):
        return last
    return {"answer": ctx.identifiers[0] if ctx.identifiers else ctx.user_text.strip()[:_CLIP]}


def _malformed(text: str, fmt: Any) -> str:
    """A call with broken syntax (a brace or a closing parameter tag missing) that the format cannot parse."""
    for old in ("}", "</parameter>"):
        at = text.rfind(old) if old == "}" else text.find(old)
        if at >= 0:
            bad = text[:at] + text[at + len(old):]
            if fmt.parse(bad).kind == "invalid":
                return bad
    return text[: max(len(text) * 2 // 3, 12)]


def _is_result(content: str) -> bool:
    return content.lstrip().startswith("<tool_response>")


def _unwrap(content: str) -> str:
    text = content.strip()
    if text.startswith("<tool_response>") and text.endswith("</tool_response>"):
        return text[len("<tool_response>"): -len("</tool_response>")].strip()
    return text


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _CLIP else text[: _CLIP - 3] + "..."

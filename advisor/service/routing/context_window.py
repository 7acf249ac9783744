"""Context windows in the decision: a rung that cannot hold the prompt plus the output asked for is passed over.

Each rung's window is its ladder entry's (`Model.window`: ``context_length``, or the llama.cpp ``n_ctx`` the
embedded engine is started with when that is smaller). The prompt's size is estimated before any rung is called,
at `CHARS_PER_TOKEN` characters a token over every message's text, tool call and the tools' definitions (no
tokenizer runs on the request path); the output is the attempt's ``max_tokens`` (`max_tokens_for`). When no rung
the request may use can hold it, the client gets what OpenAI answers: 400 ``context_length_exceeded`` on
``messages``, with the estimate and the largest window, never an address. A serving engine that still refuses the
prompt as too long (the estimate is an estimate) is mapped to the same 400 (`is_overflow`).
"""

from __future__ import annotations

import json
import re

from advisor.service.api.request import RequestError

#: Characters a token, for the estimate (English prose and code run 3.5 to 4.5 with the ladders' tokenizers).
CHARS_PER_TOKEN = 4.0
#: What a serving engine says when the prompt is longer than its window (llama.cpp in the embedded Triton, vLLM,
#: OpenAI-compatible servers).
_OVERFLOW = re.compile(r"(?i)the prompt has \d+ tokens|context_length_exceeded|maximum context length|"
                       r"exceeds? (?:the )?(?:model's )?(?:maximum )?context|prompt is too long")


def prompt_tokens(req) -> int:
    """The request's estimated prompt size in tokens (`CHARS_PER_TOKEN`)."""
    chars = 0
    for m in req.messages:
        chars += len(m.text())
        for call in m.tool_calls or ():
            if call.function is not None:
                chars += len(call.function.name) + len(call.function.arguments or "")
    if req.tools:
        chars += sum(len(json.dumps(t.function.parameters or {})) + len(t.function.description or "")
                     + len(t.function.name) for t in req.tools if t.function is not None)
    return int(chars / CHARS_PER_TOKEN)


def fitting(rt, req, names: list[str], max_tokens_for) -> list[str]:
    """The rungs of `names` whose window holds the prompt and the output asked for, in order (RequestError 400
    ``context_length_exceeded`` when none does)."""
    if not names:
        return names
    need = prompt_tokens(req)
    fit = [n for n in names if need + max_tokens_for(rt, req, rt.rungs[n]) <= rt.rungs[n].window]
    if not fit:
        raise too_long(need, max(rt.rungs[n].window for n in names))
    return fit


def too_long(need: int | None, window: int | None) -> RequestError:
    """OpenAI's answer to a prompt no rung can hold."""
    said = (f"about {need:,} tokens of messages plus the output asked for" if need is not None
            else "the messages plus the output asked for")
    limit = f"; the largest context any rung this request may use holds is {window:,} tokens" if window else ""
    return RequestError(f"This request needs {said}, which no model can hold{limit}. Shorten the messages or "
                        "lower max_tokens.", param="messages", code="context_length_exceeded")


def is_overflow(error: str | None) -> bool:
    """Whether a failed attempt's error is its engine refusing a prompt longer than its window."""
    return bool(error) and _OVERFLOW.search(error) is not None

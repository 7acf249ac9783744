"""The record of an episode a judge reads: whole files up to a budget, and a plain statement of what was cut.

The budget comes from the judge model's context length (`budget_chars`): its context minus the reply it may
write, at a conservative `CHARS_PER_TOKEN`, minus the rest of the prompt. Within the budget the record holds,
in this order of priority: the stop reason and the final answer, every workspace file whole, the tool calls
with their observations, the fixture API requests. When something does not fit, it is shortened in a way the
judge is told about: a file keeps its beginning AND its end with a marker giving the characters cut from the
middle, calls keep the first and the last ones, and a "Cut from this record" line at the top lists each cut.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

CHARS_PER_TOKEN = 3  #: conservative (code and JSON run 2.5-4 characters per token)
DEFAULT_BUDGET_CHARS = 48_000  #: when the judge's context length is unknown
MAX_FILES = 200
OBSERVATION_CHARS = 2000  #: one tool observation, at most
_MIN_SLICE = 400


def budget_chars(context_length: int | None, reply_tokens: int = 512, prompt_chars: int = 0) -> int:
    """Characters of transcript that fit a judge with `context_length` tokens, after its reply and the prompt."""
    if not context_length:
        return DEFAULT_BUDGET_CHARS
    return max(2_000, (int(context_length) - int(reply_tokens)) * CHARS_PER_TOKEN - int(prompt_chars))


@dataclass
class Record:
    """The transcript text and the list of cuts made to fit the budget."""

    text: str
    cuts: list[str] = field(default_factory=list)


def _clip_middle(text: str, limit: int, what: str, cuts: list[str]) -> str:
    """`text` whole when it fits, else its head and tail around a marker (and a line in `cuts`)."""
    if len(text) <= limit:
        return text
    limit = max(limit, _MIN_SLICE)
    head, tail = limit // 3, limit - limit // 3
    cut = len(text) - head - tail
    cuts.append(f"{what}: {cut:,} of {len(text):,} characters cut from the middle (beginning and end shown)")
    return f"{text[:head]}\n[... {cut:,} characters of {what} cut here to fit the judge's context ...]\n{text[-tail:]}"


def _files(episode) -> list[tuple[str, str]]:
    ws = getattr(episode, "workspace", None)
    if ws is None or not ws.is_dir():
        return []
    # lazy: this module is loaded by `import advisor`, which stays light
    from advisor.tools.files import workspace_files

    return [(rel, (ws / rel).read_text(encoding="utf-8", errors="replace"))  # regular files only: links not followed
            for rel, size in workspace_files(ws) if size is not None]


def _fit_files(files: list[tuple[str, str]], budget: int, cuts: list[str]) -> list[str]:
    """Files whole when they all fit; else the small ones whole and the large ones share what is left."""
    if len(files) > MAX_FILES:
        cuts.append(f"{len(files) - MAX_FILES} workspace file(s) after the first {MAX_FILES} (by path) left out")
        files = files[:MAX_FILES]
    order = sorted(range(len(files)), key=lambda i: len(files[i][1]))
    limits = [0] * len(files)
    left, remaining = budget, len(files)
    for i in order:  # smallest first: each gets a fair share of what is left, unused share passes on
        share = max(left // max(remaining, 1), 0)
        limits[i] = min(len(files[i][1]), share)
        left -= limits[i]
        remaining -= 1
    return [f"--- file {name} ({len(text):,} characters) ---\n" + _clip_middle(text, limits[i], f"file {name}", cuts)
            for i, (name, text) in enumerate(files)]


def _calls(episode) -> list[str]:
    lines = []
    for i, call in enumerate(episode.calls, 1):
        args = json.dumps(call.arguments, ensure_ascii=False)
        if call.name == "write_file" and len(args) > 300:  # the file itself is shown below in full
            args = json.dumps({k: (v if k != "content" else f"<{len(str(v)):,} characters, see the file>")
                               for k, v in call.arguments.items()}, ensure_ascii=False)
        obs = call.observation
        if len(obs) > OBSERVATION_CHARS:
            obs = obs[:OBSERVATION_CHARS] + f" [... {len(obs) - OBSERVATION_CHARS:,} characters of this observation cut]"
        lines.append(f"[{i}] {call.name}({args}) -> {'ok' if call.ok else 'ERROR'}: {obs}")
    for req in getattr(episode, "api_log", []) or []:
        lines.append(f"API {req.get('method')} {req.get('path')} headers={json.dumps(req.get('headers'))} "
                     f"json={json.dumps(req.get('json'))} -> {req.get('status')}")
    return lines


def _fit_lines(lines: list[str], budget: int, cuts: list[str]) -> list[str]:
    """All lines when they fit; else the first and the last ones, the middle ones named as cut."""
    if sum(len(x) + 1 for x in lines) <= budget:
        return lines
    head: list[str] = []
    tail: list[str] = []
    used, lo, hi = 0, 0, len(lines) - 1
    while lo <= hi:
        take = lines[lo] if len(head) <= len(tail) else lines[hi]
        if used + len(take) + 1 > budget:
            break
        used += len(take) + 1
        if len(head) <= len(tail):
            head.append(take)
            lo += 1
        else:
            tail.insert(0, take)
            hi -= 1
    if lo <= hi:
        cuts.append(f"tool calls/API requests {lo + 1}-{hi + 1} of {len(lines)} left out")
        return [*head, f"[... entries {lo + 1}-{hi + 1} of {len(lines)} left out to fit the judge's context ...]", *tail]
    return [*head, *tail]


def build(episode, budget: int) -> Record:
    """The judge's record of `episode` within `budget` characters, saying what was cut."""
    cuts: list[str] = []
    final = episode.final if episode.final is not None else "(none: the episode ended without a final answer)"
    final = _clip_middle(final, max(budget // 4, 2_000), "the final answer", cuts)
    files = _files(episode)
    calls = _calls(episode)
    left = max(budget - len(final) - 600, 1_000)  # 600: headings, the cut line, markers
    file_chars = sum(len(t) + 60 for _, t in files)
    call_chars = sum(len(x) + 1 for x in calls)
    call_budget = min(call_chars, max(left // 4, left - file_chars))
    file_lines = _fit_files(files, left - call_budget, cuts)
    call_lines = _fit_lines(calls, call_budget, cuts)
    parts = [f"Stop reason: {episode.stop_reason}",
             "Cut from this record: " + ("; ".join(cuts) if cuts else "nothing (everything is shown in full)"),
             "## Tool calls and observations", *(call_lines or ["(none)"]),
             "## Workspace files after the run", *(file_lines or ["(none)"]),
             "## Final answer", final]
    return Record("\n".join(parts), cuts)

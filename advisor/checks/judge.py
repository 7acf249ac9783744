"""Judge-graded criteria: the ``judge`` check type, the `Judge` protocol and `TritonJudge`, which asks the
ladder's judge role on Triton.

The ``judge`` check is registered like every other check; it grades with the `Judge` of its `CheckContext`
(none configured: the criterion is not graded, so the run is unscored). The judge sees the task, the criterion (name, description, rubric) and a transcript of the episode (tool
calls with observations, fixture API requests, workspace files, final answer) and must answer with a JSON
verdict ``{"score": <0..1>, "reason": "..."}``. A reply that does not parse is a `JudgeError`: the scorer
then marks the run unscored, never 0.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Protocol

from advisor.checks.base import CheckContext, CheckOutcome, CheckSpec, check
from advisor.errors import AdvisorError

MAX_TRANSCRIPT_CHARS = 12_000


class JudgeError(AdvisorError):
    """The judge could not grade (unreachable, or a reply without a valid verdict), and what it cost anyway."""

    def __init__(self, message: str, *, input_tokens: int = 0, output_tokens: int = 0, cost_usd: float = 0.0):
        super().__init__(message)
        self.input_tokens = input_tokens  #: judge tokens spent before it failed
        self.output_tokens = output_tokens
        self.cost_usd = cost_usd


@dataclass
class JudgeGrade:
    """A judge's grade of one criterion, with what grading cost."""

    score: float  #: 0-1 fraction of the criterion's weight
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    reason: str = ""


class Judge(Protocol):
    """Grades prose criteria of one episode."""

    async def grade(self, criterion, task, episode) -> JudgeGrade:
        """Grade one criterion; raise on failure (the run becomes unscored)."""
        ...


def transcript(task, episode, limit: int = MAX_TRANSCRIPT_CHARS) -> str:
    """A compact text record of the episode for a judge."""
    lines = [f"Stop reason: {episode.stop_reason}"]
    for i, call in enumerate(episode.calls, 1):
        obs = call.observation if len(call.observation) <= 600 else call.observation[:600] + " [...]"
        lines.append(f"[{i}] {call.name}({json.dumps(call.arguments, ensure_ascii=False)[:800]}) "
                     f"-> {'ok' if call.ok else 'ERROR'}: {obs}")
    for req in episode.api_log:
        lines.append(f"API {req.get('method')} {req.get('path')} headers={json.dumps(req.get('headers'))} "
                     f"json={json.dumps(req.get('json'))[:400]} -> {req.get('status')}")
    if episode.workspace is not None and episode.workspace.is_dir():
        for path in sorted(episode.workspace.rglob("*"))[:20]:
            if path.is_file():
                text = path.read_text(encoding="utf-8", errors="replace")
                lines.append(f"--- file {path.relative_to(episode.workspace).as_posix()} ---\n{text[:1500]}")
    lines.append("--- final answer ---\n" + (episode.final if episode.final is not None else "(none)"))
    body = "\n".join(lines)
    return body if len(body) <= limit else body[: limit // 3] + "\n[... transcript cut ...]\n" + body[-2 * limit // 3:]


def rubric_prompt(criterion, task, episode) -> str:
    """The prompt a judge model gets for one criterion."""
    return (
        "You are grading one criterion of an AI agent's work. Read the task, the criterion and the record of "
        "what the agent did, then answer ONLY with a JSON object: {\"score\": <number from 0 to 1>, "
        "\"reason\": \"<one sentence>\"}. 1 means fully met, 0 means not met; use fractions for partial credit.\n\n"
        f"## Task\n{task.instructions}\n\n"
        f"## Criterion: {criterion.name}\n{criterion.description}\n{getattr(criterion.check, 'rubric', '')}\n\n"
        f"## What the agent did\n{transcript(task, episode)}\n\n## Your verdict (JSON only)\n"
    )


_OBJ = re.compile(r"\{.*?\}", re.S)


def parse_verdict(text: str) -> tuple[float, str]:
    """(score 0-1, reason) from a judge reply; raise `JudgeError` when there is no valid verdict."""
    for candidate in [text.strip(), *_OBJ.findall(text)]:
        try:
            data = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(data, dict) and isinstance(data.get("score"), (int, float)) and not isinstance(data["score"], bool):
            score = float(data["score"])
            if 0.0 <= score <= 1.0:
                return score, str(data.get("reason", ""))
            raise JudgeError(f"judge score {score} is outside 0-1")
    raise JudgeError(f"judge reply has no JSON verdict with a score: {text[:120]!r}")


class TritonJudge:
    """Grades with the ladder's judge role through a Triton client (`advisor.triton.client.TritonClient`).

    `client` is anything with ``generate(model, prompt, max_tokens=...)`` returning an object with ``text``,
    ``input_tokens`` and ``output_tokens`` (sync or async); `model` is the ladder `Model` of the judge role
    (its Triton model name and its price).
    """

    def __init__(self, client: Any, model: Any, max_tokens: int = 256):
        self.client = client
        self.model = model
        self.max_tokens = max_tokens

    @classmethod
    def from_ladder(cls, ladder, url: str | None = None, max_tokens: int = 256) -> "TritonJudge":
        """A judge for the ladder's judge role; `AdvisorError` when the ladder has none."""
        if ladder.roles.judge is None:
            raise AdvisorError(f"ladder {ladder.name!r} has no judge role; add roles.judge or use deterministic checks")
        from advisor.triton.client import TritonClient

        judge = ladder.roles.judge
        return cls(TritonClient(url or judge.url or ladder.url), judge, max_tokens)

    async def _generate(self, prompt: str):
        import asyncio
        import inspect

        generate = self.client.generate
        name = self.model.triton_model
        if inspect.iscoroutinefunction(generate):
            return await generate(name, prompt, max_tokens=self.max_tokens)
        result = await asyncio.to_thread(generate, name, prompt, max_tokens=self.max_tokens)
        return await result if inspect.isawaitable(result) else result

    async def grade(self, criterion, task, episode) -> JudgeGrade:
        """Ask the judge model; raise `JudgeError` when it fails or its verdict does not parse."""
        try:
            result = await self._generate(rubric_prompt(criterion, task, episode))
        except AdvisorError as exc:
            raise JudgeError(f"judge {self.model.name} failed: {exc}") from None
        tokens_in, tokens_out = int(result.input_tokens or 0), int(result.output_tokens or 0)
        cost = self.model.attempt_cost(tokens_in, tokens_out)
        try:
            score, reason = parse_verdict(result.text)
        except JudgeError as exc:  # spent even though it failed
            raise JudgeError(str(exc), input_tokens=tokens_in, output_tokens=tokens_out, cost_usd=cost) from None
        return JudgeGrade(score, tokens_in, tokens_out, cost, reason)


class JudgeCheck(CheckSpec):
    """Graded by the ladder's judge role with a rubric (the criterion's description plus `rubric`)."""

    rubric: str = ""


@check("judge", JudgeCheck, needs_judge=True)
async def judge(check: JudgeCheck, task, episode, ctx: CheckContext) -> CheckOutcome:
    """Ask the context's judge; no judge, or a judge that fails, leaves the criterion ungraded (never 0)."""
    if ctx.judge is None:
        return CheckOutcome(None, "needs a judge and none is configured")
    try:
        grade = await ctx.judge.grade(ctx.criterion, task, episode)
    except JudgeError as exc:
        return CheckOutcome(None, f"judge failed: {exc}", exc.input_tokens, exc.output_tokens, exc.cost_usd)
    except Exception as exc:  # any judge failure leaves the criterion ungraded, never 0
        return CheckOutcome(None, f"judge failed: {type(exc).__name__}: {exc}")
    return CheckOutcome(max(0.0, min(1.0, float(grade.score))), grade.reason or "judged", grade.input_tokens,
                        grade.output_tokens, grade.cost_usd)

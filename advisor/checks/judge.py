"""Judge-graded criteria: the ``judge`` check type, the `Judge` protocol and `TritonJudge`, which asks the
ladder's judge role on Triton.

The ``judge`` check is registered like every other check; it grades with the `Judge` of its `CheckContext`
(none configured: the criterion is not graded, so the run is unscored). The judge sees the task, the
criterion (name, description, rubric, its weight) and the record of the episode built by
`advisor.checks.judge_transcript`: whole workspace files, tool calls with observations, fixture API requests
and the final answer, fitted to a budget computed from the judge model's context length and saying what was
cut. It answers with a verdict such as ``{"score": <0..1>, "reason": "..."}``; `parse_verdict` tolerates the
usual shapes models write. A reply without a verdict is a `JudgeError`: the scorer then marks the run
unscored, never 0.
"""

from __future__ import annotations

import ast
import asyncio
import inspect
import json
import re
from dataclasses import dataclass
from typing import Any, Protocol

from advisor.checks.base import CheckContext, CheckOutcome, CheckSpec, check
from advisor.checks.judge_transcript import DEFAULT_BUDGET_CHARS, budget_chars, build
from advisor.errors import AdvisorError


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


def transcript(task, episode, limit: int = DEFAULT_BUDGET_CHARS) -> str:
    """The judge's record of the episode within `limit` characters (whole files first; cuts are stated)."""
    return build(episode, limit).text


def _weight_line(criterion, task) -> str:
    side = next((name for name, crits in (("instruction following", task.instruction_following),
                                          ("task completion", task.task_completion))
                 if any(c is criterion or c.name == criterion.name for c in crits)), None)
    line = f"Weight: {criterion.weight:g} of the 100 points of the {side or 'checklist'} checklist"
    original = getattr(criterion, "original_weight", None)
    return line + (f" ({original:g} points in the source scenario)." if original is not None else ".")


def rubric_prompt(criterion, task, episode, context_length: int | None = None, reply_tokens: int = 512) -> str:
    """The prompt a judge model gets for one criterion; the record fills what the judge's context leaves."""
    rubric = getattr(criterion.check, "rubric", "") or ""
    head = (
        "You are grading ONE criterion of an AI agent's work. Read the task, the criterion and the record of "
        "what the agent did (its tool calls, the workspace files after the run, its final answer), then answer "
        "ONLY with a JSON object: {\"score\": <number from 0 to 1>, \"reason\": \"<one sentence>\"}. 1 means "
        "fully met, 0 means not met; use fractions for partial credit. Judge from the record only; if a part "
        "of the record was cut, do not assume what it contained.\n\n"
        f"## Task\n{task.instructions}\n\n"
        f"## Criterion: {criterion.name}\n{criterion.description}\n{rubric}\n{_weight_line(criterion, task)}\n\n"
        "## What the agent did\n")
    tail = "\n\n## Your verdict (JSON only)\n"
    budget = budget_chars(context_length, reply_tokens, len(head) + len(tail)) if context_length else DEFAULT_BUDGET_CHARS
    return head + transcript(task, episode, budget) + tail


_THINK = re.compile(r"<think>.*?</think>", re.S | re.I)
_OBJ = re.compile(r"\{[^{}]*\}", re.S)
_KEYS = ("score", "grade", "rating", "verdict", "result", "pass", "passed", "met")
_WORDS = {"pass": 1.0, "passed": 1.0, "yes": 1.0, "met": 1.0, "true": 1.0, "fully met": 1.0, "correct": 1.0,
          "fail": 0.0, "failed": 0.0, "no": 0.0, "not met": 0.0, "false": 0.0, "unmet": 0.0, "incorrect": 0.0,
          "partial": 0.5, "partially met": 0.5}
_LINE = re.compile(r"\b(?:score|grade|rating|verdict)\b\s*[:=]\s*\**\s*([0-9.]+\s*(?:/\s*[0-9.]+|%)?|[a-z ]+)", re.I)


def _value(raw: Any, scale: Any = None) -> float | None:
    """A 0-1 score from a verdict value: a number (with an optional out_of scale), "3/4", "80%", or a word."""
    if isinstance(raw, bool):
        return 1.0 if raw else 0.0
    if isinstance(raw, (int, float)):
        value = float(raw)
        if isinstance(scale, (int, float)) and not isinstance(scale, bool) and scale > 0:
            value /= float(scale)
        return value
    if isinstance(raw, str):
        text = raw.strip().lower().rstrip(".")
        m = re.fullmatch(r"([0-9.]+)\s*/\s*([0-9.]+)", text)
        if m and float(m.group(2)) > 0:
            return float(m.group(1)) / float(m.group(2))
        m = re.fullmatch(r"([0-9.]+)\s*%", text)
        if m:
            return float(m.group(1)) / 100.0
        try:
            return _value(float(text), scale)
        except ValueError:
            return _WORDS.get(text)
    return None


def _from_mapping(data: dict) -> tuple[float, str] | None:
    lowered = {str(k).lower(): v for k, v in data.items()}
    for key in _KEYS:
        if key in lowered:
            value = _value(lowered[key], lowered.get("out_of", lowered.get("max", lowered.get("scale"))))
            if value is not None:
                reason = lowered.get("reason", lowered.get("reasoning", lowered.get("explanation", "")))
                return value, str(reason)
    return None


def _candidates(text: str) -> list[Any]:
    found = []
    for chunk in [text.strip(), *(m.group(1) for m in re.finditer(r"```(?:json)?\s*\n?(.*?)```", text, re.S)),
                  *_OBJ.findall(text)]:
        for loader in (json.loads, ast.literal_eval):
            try:
                found.append(loader(chunk))
                break
            except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
                continue
    return found


def parse_verdict(text: str) -> tuple[float, str]:
    """(score 0-1, reason) from a judge reply; raise `JudgeError` when there is no valid verdict.

    Tolerated shapes: a JSON (or Python-literal) object alone, in a ```json fence or inside prose, after a
    ``<think>`` block; keys score/grade/rating/verdict/result/pass/passed/met; values a 0-1 number, a number
    with ``out_of``/``max``/``scale``, ``"3/4"``, ``"80%"``, true/false, pass/fail/yes/no/met/not met/partial;
    else a ``Score: 0.8`` line. The last verdict in the reply wins (models restate and correct themselves).
    """
    body = _THINK.sub("", text)
    for data in reversed(_candidates(body)):
        got = _from_mapping(data) if isinstance(data, dict) else None
        if got is not None:
            return _checked(*got)
    lines = _LINE.findall(body)
    if lines:
        value = _value(lines[-1])
        if value is not None:
            return _checked(value, "")
    raise JudgeError(f"judge reply has no JSON verdict with a score: {text[:120]!r}")


def _checked(score: float, reason: str) -> tuple[float, str]:
    if not 0.0 <= score <= 1.0:
        raise JudgeError(f"judge score {score:g} is outside 0-1 (and no out_of scale was given)")
    return score, reason


class TritonJudge:
    """Grades with the ladder's judge role through a Triton client (`advisor.triton.client.TritonClient`).

    `client` is anything with ``generate(model, prompt, max_tokens=...)`` returning an object with ``text``,
    ``input_tokens`` and ``output_tokens`` (sync or async); `model` is the ladder `Model` of the judge role
    (its Triton model name and its price).
    """

    def __init__(self, client: Any, model: Any, max_tokens: int = 512):
        self.client = client
        self.model = model
        self.max_tokens = max_tokens

    @classmethod
    def from_ladder(cls, ladder, url: str | None = None, max_tokens: int = 512) -> "TritonJudge":
        """A judge for the ladder's judge role; `AdvisorError` when the ladder has none."""
        if ladder.roles.judge is None:
            raise AdvisorError(f"ladder {ladder.name!r} has no judge role; add roles.judge or use deterministic checks")
        # lazy: this module is loaded by `import advisor`, which stays light
        from advisor.backends import client_for

        judge = ladder.roles.judge
        return cls(client_for(judge, ladder, url=url), judge, max_tokens)

    async def _generate(self, prompt: str):
        generate = self.client.generate
        name = self.model.model_id
        if inspect.iscoroutinefunction(generate):
            return await generate(name, prompt, max_tokens=self.max_tokens)
        result = await asyncio.to_thread(generate, name, prompt, max_tokens=self.max_tokens)
        return await result if inspect.isawaitable(result) else result

    async def grade(self, criterion, task, episode) -> JudgeGrade:
        """Ask the judge model; raise `JudgeError` when it fails or its verdict does not parse."""
        try:
            prompt = rubric_prompt(criterion, task, episode, getattr(self.model, "context_length", None),
                                   self.max_tokens)
            result = await self._generate(prompt)
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

"""Checks and scoring: one module per check family, a registry by check type, and `score_episode`.

Families: text (regex, json_schema, json_equals), workspace (file, python), trajectory (state, tool_call),
judge (`Judge` protocol, `TritonJudge`).
"""

from advisor.checks.base import CheckError, CheckOutcome, check_registry, get_check, parse_json_lenient
from advisor.checks.judge import Judge, JudgeError, JudgeGrade, TritonJudge, parse_verdict, rubric_prompt
from advisor.checks.scoring import Scorecard, score_episode

__all__ = ["CheckError", "CheckOutcome", "Judge", "JudgeError", "JudgeGrade", "Scorecard", "TritonJudge",
           "check_registry", "get_check", "parse_json_lenient", "parse_verdict", "rubric_prompt", "score_episode"]

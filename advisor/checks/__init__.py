"""Checks and scoring: one module per check family, the `CHECKS` registry by check type, and `score_episode`.

Families: text (regex, json_schema, json_equals), workspace (file, python), trajectory (state, tool_call),
judge (the judge check, the `Judge` protocol, `TritonJudge`). Each family module declares its check types
(spec model + function, registered with `check`); see docs/extending.md for adding one.
"""

from advisor.checks.base import (CHECKS, CheckContext, CheckError, CheckOutcome, CheckSpec, CheckType, check,
                                 check_registry, get_check, needs_judge, parse_json_lenient, validate_check)
from advisor.checks.judge import Judge, JudgeError, JudgeGrade, TritonJudge, parse_verdict, rubric_prompt
from advisor.checks.scoring import Scorecard, score_episode

__all__ = ["CHECKS", "CheckContext", "CheckError", "CheckOutcome", "CheckSpec", "CheckType", "Judge", "JudgeError",
           "JudgeGrade", "Scorecard", "TritonJudge", "check", "check_registry", "get_check", "needs_judge",
           "parse_json_lenient",
           "parse_verdict", "rubric_prompt", "score_episode", "validate_check"]

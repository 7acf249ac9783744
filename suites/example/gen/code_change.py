"""code_change: single-file changes checked by running the task's test script (3-4 reference steps)."""

from __future__ import annotations

from common import called, crit, file_check, python, regex, step, task

CLS = "code_change"
TOOLS = ["list_files", "read_file", "write_file", "run_python"]
PASS = "ALL TESTS PASSED"


def _tests(module: str, body: str) -> str:
    return f"from {module} import *\n\n{body.strip()}\nprint({PASS!r})\n"


def change(id, module, ask, before, after, test_body, func, value_expr, value, wrong_value, skill):
    """One single-file change: module before/after, an assert-based test script, a value to report."""
    mod_file, test_file = f"{module}.py", f"test_{module}.py"
    tests = _tests(module, test_body)
    probe = f"import runpy\nrunpy.run_path('{test_file}')\nfrom {module} import *\nprint({value_expr})\n"
    ask = ask.strip() + f"\nThe tests are in `{test_file}`. After the change, report what `{value_expr}` returns."
    if skill:
        instructions = ask + "\nWork the way our Python change guidelines describe."
        IF = [crit("ran_tests", 40, called("run_python"), "Ran the tests before answering."),
              crit("reply_format", 40, regex(rf"^CHANGED {module}\.py: .+\nRESULT: .+"),
                   "Replies `CHANGED <file>: <summary>` then `RESULT: <value>`."),
              crit("tests_untouched", 10, file_check(test_file, equals=tests), "Did not edit the tests."),
              crit("docstring", 10, regex(rf"def {func}\([^)]*\)[^:]*:\s*\n\s+[\"']{{3}}", target=f"file:{mod_file}"),
                   f"{func} has a docstring.")]
        final = f"CHANGED {module}.py: {_summary(id)}\nRESULT: {value}"
    else:
        instructions = ask + (f"\nDo not edit `{test_file}`. Reply with `CHANGED {module}.py: <one-line summary>` "
                              "and, on a second line, `RESULT: <value>`.")
        IF = [crit("tests_untouched", 50, file_check(test_file, equals=tests), "Did not edit the tests."),
              crit("reply_format", 50, regex(rf"^CHANGED {module}\.py: .+\nRESULT: .+"))]
        final = f"CHANGED {module}.py: {_summary(id)}\nRESULT: {value}"
    return task(
        id, CLS, instructions, TOOLS, skill="python-changes" if skill else None,
        files={mod_file: before.lstrip(), test_file: tests},
        IF=IF,
        TC=[crit("tests_pass", 70, python(test_file, PASS), "The test script passes."),
            crit("reports_value", 30, regex(rf"(?<![\w.]){_escape(value)}(?![\w.])"), f"Reports {value}.")],
        steps=[step("read_file", path=mod_file), step("read_file", path=test_file),
               step("write_file", path=mod_file, content=after.lstrip()),
               step("run_python", how=bool(skill), code=probe)],
        final=final,
        sloppy=f"I fixed {module}.py, it returns {value} now.",
        wrong=f"CHANGED {module}.py: {_summary(id)}\nRESULT: {wrong_value}",
        limits={"max_turns": 14},
    )


def _escape(value: str) -> str:
    import re

    return re.escape(value)


_SUMMARIES = {}


def _summary(id: str) -> str:
    return _SUMMARIES.get(id, "applied the requested change")


def tasks() -> list[dict]:
    """The code_change tasks."""
    from code_cases import CASES

    out = []
    for case in CASES:
        _SUMMARIES[case["id"]] = case["summary"]
        out.append(change(case["id"], case["module"], case["ask"], case["before"], case["after"], case["tests"],
                          case["func"], case["expr"], case["value"], case["wrong"], case["skill"]))
    return out

"""Suites: an organization's tasks grouped in task classes, loaded from YAML and validated.

A task has instructions, an optional skill document (each task then runs with and without it), the tools it
may use and their fixtures, limits, and two weighted checklists (instruction following, task completion),
each summing to 100. A criterion is checked deterministically or by a judge rung with a rubric. A task may
carry a reference trajectory: a known-good sequence of tool calls and final answer, used to self-test the
checks (the reference must score 100) and by the simulated stand-in rungs.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Annotated, Any

from pydantic import ConfigDict, Field, PlainValidator, SerializeAsAny, field_validator, model_validator

from advisor.checks.base import CheckSpec, validate_check
from advisor.errors import ConfigError, did_you_mean
from advisor.records import text_hash
from advisor.strict import StrictModel
from advisor.yamlio import line_of, read_text, read_yaml, validate

SUITE_VERSION = 1


class Limits(StrictModel):
    """Budgets of one episode; the loop always ends and records which one stopped it."""

    max_turns: int = Field(default=12, ge=1, description="Model calls per episode.")
    max_tokens: int = Field(default=60_000, ge=1, description="Input + output tokens per episode.")
    timeout_s: float = Field(default=120.0, gt=0, description="Wall time per episode, seconds.")
    max_invalid: int = Field(default=2, ge=1, description="Unparseable replies in a row before `invalid_output`.")


class LimitsOverride(StrictModel):
    """Per-task overrides of the suite's default limits."""

    max_turns: int | None = Field(default=None, ge=1)
    max_tokens: int | None = Field(default=None, ge=1)
    timeout_s: float | None = Field(default=None, gt=0)
    max_invalid: int | None = Field(default=None, ge=1)


# ----------------------------------------------------------------------------- checks
# A check's fields are declared with its function in its family module (advisor/checks/); `validate_check`
# picks the model by `type` from the check registry, so adding a check type does not touch this file.

Check = Annotated[SerializeAsAny[CheckSpec], PlainValidator(validate_check)]


class Criterion(StrictModel):
    """One weighted checklist item."""

    name: str
    description: str = ""
    weight: float = Field(gt=0, description="Points of 100 this criterion carries.")
    check: Check
    original_weight: float | None = Field(default=None, gt=0, description=(
        "The criterion's weight in its source (an imported scenario's max_score); when every criterion of a "
        "task has one, the scenario's own weighted score is reported beside IF/TC."))


# ----------------------------------------------------------------------------- fixtures and reference

class ApiRoute(StrictModel):
    """One route of the in-process fixture HTTP API."""

    method: str = "GET"
    path: str  #: exact path, or a regex when it starts with ^
    status: int = 200
    response: Any = None  #: JSON body returned
    require_headers: dict[str, str] = Field(default_factory=dict)  #: else 401 with an error body


class Fixtures(StrictModel):
    """What the task's tools see: workspace files, searchable docs, a fixture API."""

    files: dict[str, str] = Field(default_factory=dict)  #: path in workspace -> content
    docs: dict[str, str] = Field(default_factory=dict)  #: doc id -> text, for search_docs / read_doc
    api: list[ApiRoute] = Field(default_factory=list)
    skill_docs: dict[str, str] = Field(default_factory=dict)  #: doc id -> text, added to docs with the skill only


class ReferenceStep(StrictModel):
    """One step of a known-good trajectory."""

    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    how: bool = False  #: True: the step is how the instructions/skill say to work (dropping it costs IF)


class Reference(StrictModel):
    """A known-good trajectory: steps then a final answer scoring 100 on both checklists."""

    steps: list[ReferenceStep] = Field(default_factory=list)
    final: str
    final_sloppy: str | None = None  #: reaches the goal but ignores how it was asked to (IF loss)
    final_wrong: str | None = None  #: a plausible but wrong answer (TC loss)


class Replay(StrictModel):
    """A live step captured by the service (`advisor suite from-traffic`): the conversation up to the step (as
    `advisor.agent.conversation.Conversation` data), replayed as it was on every rung; the model's one reply is
    the episode (a tool call is not run), checked against `reference` or the class's verifier."""

    conversation: dict[str, Any]
    served_by: str = ""  #: the rung that answered it live
    decision_id: str = ""  #: the service's decision id of the step
    session_id: str | None = None
    session_step: int | None = None
    tenant: str = ""
    check: str = Field(default="reference", pattern="^(verifier|reference|judge)$",
                       description="What checks the replayed step: the class's verifier, equivalence with the "
                       "reference (same_step), or the judge against the reference (a final answer).")
    reference: dict[str, Any] | None = None  #: the accepted live reply: {calls: [[name, arguments]], final: text}
    #: the live request's sampling parameters (seed, temperature, ... as sent; none: the rung's defaults): a replay
    #: draws as the live request did, on every rung and replica, instead of the probe's seeds
    sampling: dict[str, Any] = Field(default_factory=dict)


class Task(StrictModel):
    """One task of a suite."""

    id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    task_class: str = Field(alias="class")
    instructions: str
    skill: str | None = None  #: path of a skill document, relative to the suite file
    skill_text: str | None = None  #: filled on load from `skill`
    tools: list[str] = Field(default_factory=list)
    fixtures: Fixtures = Field(default_factory=Fixtures)
    limits: LimitsOverride = Field(default_factory=LimitsOverride)
    instruction_following: list[Criterion] = Field(min_length=1)
    task_completion: list[Criterion] = Field(min_length=1)
    reference: Reference | None = None
    replay: Replay | None = None  #: a captured live step: one reply on the recorded conversation, no tool run
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @field_validator("instruction_following", "task_completion")
    @classmethod
    def _weights_sum_to_100(cls, value: list[Criterion]) -> list[Criterion]:
        total = sum(c.weight for c in value)
        if abs(total - 100.0) > 1e-6:
            raise ValueError(f"criterion weights sum to {total:g}, not 100")
        names = [c.name for c in value]
        dup = {n for n in names if names.count(n) > 1}
        if dup:
            raise ValueError(f"duplicate criterion name(s): {', '.join(sorted(dup))}")
        return value

    @property
    def has_skill(self) -> bool:
        """True when the task has a skill document (then it runs in both conditions)."""
        return self.skill_text is not None

    def conditions(self) -> list[str]:
        """The conditions the task runs under: baseline, plus skill when it has one."""
        return ["baseline", "skill"] if self.has_skill else ["baseline"]

    def for_condition(self, condition: str) -> "Task":
        """The task as the agent sees it in `condition`: with the skill, the skill's documents join the docs
        (and the doc tools join the tools); the baseline never sees them."""
        if condition != "skill" or not self.fixtures.skill_docs:
            return self
        docs = {**self.fixtures.docs, **self.fixtures.skill_docs}
        tools = [*self.tools, *(t for t in ("search_docs", "read_doc") if t not in self.tools)]
        return self.model_copy(update={"fixtures": self.fixtures.model_copy(update={"docs": docs}), "tools": tools})

    def criteria(self) -> list[Criterion]:
        """Every criterion: instruction following, then task completion."""
        return [*self.instruction_following, *self.task_completion]

    def scenario_weighted(self) -> bool:
        """True when every criterion carries its source weight (then a scenario score is computed)."""
        return all(c.original_weight is not None for c in self.criteria())

    def prompt_hash(self) -> str:
        """Hash of the instructions (the request text a router sees)."""
        return text_hash(self.instructions)


class TaskClass(StrictModel):
    """A class of tasks the floor is found for."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    description: str = ""
    verifier: bool = Field(default=True, description="Live answers of this class can be verified (enables retries).")


class Suite(StrictModel):
    """A suite of tasks in classes."""

    version: int
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
    description: str = ""
    limits: Limits = Field(default_factory=Limits)
    classes: list[TaskClass] = Field(min_length=1)
    tasks: list[Task] = Field(min_length=1)
    source: str = ""  #: file the suite was loaded from

    @model_validator(mode="after")
    def _check(self) -> "Suite":
        if self.version != SUITE_VERSION:
            raise ValueError(f"unsupported suite version {self.version}; this advisor reads {SUITE_VERSION}")
        return self

    def limits_for(self, task: Task) -> Limits:
        """The suite's default limits with the task's overrides applied."""
        over = {k: v for k, v in task.limits.model_dump().items() if v is not None}
        return self.limits.model_copy(update=over)

    def task(self, task_id: str) -> Task:
        """The task with this id."""
        for t in self.tasks:
            if t.id == task_id:
                return t
        raise KeyError(task_id)

    def config_hash(self) -> str:
        """sha256 of the resolved suite (skill texts included), recorded as provenance."""
        body = self.model_dump(mode="json", by_alias=True, exclude={"source"})
        for task in body["tasks"]:  # a task without a replay leaves no key: its suite's hash (the probe's seed) holds
            if task.get("replay") is None:
                task.pop("replay", None)
        return hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()[:16]


def load_suite(path: str | Path, known_tools: set[str] | None = None) -> Suite:
    """Load and validate a suite YAML file; resolve skill files; check classes, ids and tool names.

    Every problem is a `ConfigError` naming the file, the key and the line.
    """
    path = Path(path)
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a suite is a mapping with version, name, classes and tasks")
    suite = validate(Suite, data, path)
    return _resolve(suite, data, path, known_tools)


def _resolve(suite: Suite, data: dict, path: Path, known_tools: set[str] | None) -> Suite:
    def where(*loc: Any) -> str:
        line = line_of(data, loc)
        return f"{path}:{line}" if line else str(path)

    # lazy: this module is loaded by `import advisor`, which stays light
    from advisor.suite_validation import check_classes, check_task, skill_path

    check_classes(suite, where)
    class_names = {c.name for c in suite.classes}
    seen: set[str] = set()
    tasks = []
    for i, task in enumerate(suite.tasks):
        if task.id in seen:
            raise ConfigError(f"{where('tasks', i, 'id')}: tasks.{i}.id: duplicate task id {task.id!r}")
        seen.add(task.id)
        if task.task_class not in class_names:
            raise ConfigError(f"{where('tasks', i, 'class')}: tasks.{i}.class: unknown class "
                              f"{task.task_class!r}.{did_you_mean(task.task_class, class_names)}")
        if known_tools is not None:
            for j, tool in enumerate(task.tools):
                if tool not in known_tools:
                    raise ConfigError(f"{where('tasks', i, 'tools', j)}: tasks.{i}.tools.{j}: unknown tool "
                                      f"{tool!r}.{did_you_mean(tool, known_tools)}")
        check_task(task, i, where, known_tools)
        skill_text = task.skill_text
        if task.skill is not None:
            skill_file, problem = skill_path(path, task.skill)
            if problem:
                raise ConfigError(f"{where('tasks', i, 'skill')}: tasks.{i}.skill: {problem}")
            if not skill_file.is_file():
                raise ConfigError(f"{where('tasks', i, 'skill')}: tasks.{i}.skill: skill file not found: "
                                  f"{skill_file}") from None
            skill_text = read_text(skill_file, "skill document")
        tasks.append(task.model_copy(update={"skill_text": skill_text}))
    return suite.model_copy(update={"tasks": tasks, "source": str(path)})

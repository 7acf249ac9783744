"""The stand-in agent model: a stated, seeded, parametric simulation of how a rung works a task.

Everything a stand-in does in one episode is decided by a **plan** drawn once per episode from a private
``random.Random`` seeded with ``hash(rung seed, task id, condition, request seed)`` (the request seed is the
``seed`` sampling parameter the probe sends with every call of an episode; no global RNG). Each call then
emits the plan's next action (the position is the number of assistant turns already in the prompt).

The draws, with the rung's parameters (``StandinParams``: capability ``c``, skill_uptake ``u``, redundancy
``r``) and the task's reference trajectory (``n`` steps, some marked ``how``):

1. **Difficulty** ``d = D0 + DS * n + DT * (k - 1) + CLASS_DIFFICULTY[class]`` for a reference of ``n`` steps
   using ``k`` distinct tools (longer, more varied work is harder; the class term says how much of that length is
   routine: a single-file code change reads, edits and tests one file), margin ``m = c - d``.
2. **Converge?** with probability ``p_conv = sigmoid(A * m)``. This is the size floor: a rung far below a
   task's difficulty almost never converges.
3. A non-converging episode fails in one of three ways (weights ``W_GIVE_UP``, ``W_LOOP``, ``W_MALFORMED``):
   it **gives up** after 0-2 reference steps with the reference's ``final_wrong`` (probability
   ``P_GIVE_UP_WRONG``) or a generic give-up text; it **loops** re-reading one thing, or alternating two
   (the loop stops it as ``stuck``); or it emits **malformed** tool calls until the loop stops it as ``invalid_output``.
4. A converging episode follows the reference. **Instruction following**: for a task whose conventions live
   in a skill document, the rung knows them with probability ``P_GUESS`` without the skill and
   ``P_GUESS + (1 - P_GUESS) * u * sigmoid(A * m)`` with it (the skill helps only a rung that can use it:
   ``u`` is small below the floor), and then complies with probability ``know * sigmoid(A_IF * (c - IF0))``.
   A task without a skill states its conventions in the instructions (narrow, well-specified work): the rung
   complies with probability ``sigmoid(A_IF * (c - IF0_STATED))``, a lower threshold than a separate document's.
   A non-complying episode drops each ``how`` step with probability ``P_DROP_HOW`` (at least one) and answers
   ``final_sloppy``. **Task completion**: with probability ``P_WRONG * (1 - sigmoid(A * m))`` plus the class's
   wrong-answer floor (``CLASS_WRONG_FLOOR``, else ``P_WRONG_FLOOR``; at most ``P_WRONG_FLOOR_STATED`` for a task
   without a skill, whose instructions state the exact work) it answers ``final_wrong``.
5. **Effort**: before each step after the first read, and once more before answering, with probability
   ``r`` the rung re-reads something it already read (a redundant read-only call), and with probability ``SLIP * sigmoid(-c)`` it first emits a malformed call
   and then, having read the parse error, the correct one. Small rungs therefore spend more turns.

An unknown task (instructions not in the suites the stand-in knows) gets a generic give-up answer.
"""

from __future__ import annotations

import hashlib
import math
import random
from dataclasses import dataclass, field
from typing import Any

# ----------------------------------------------------------------------------- constants of the model
A = 3.0  #: slope of convergence in (capability - difficulty)
D0 = 0.0  #: difficulty of a task with no reference steps
DS = 0.32  #: difficulty added per reference step
DT = 0.05  #: difficulty added per distinct tool beyond the first the reference uses
W_GIVE_UP, W_LOOP, W_MALFORMED = 0.27, 0.47, 0.26  #: failure modes of a non-converging episode
P_GUESS = 0.2  #: chance of following a skill's conventions without having read the skill
A_IF, IF0 = 5.0, 1.8  #: attention to a skill document's conventions: sigmoid(A_IF * (capability - IF0))
IF0_STATED = 0.7  #: the same for conventions the instructions state (a task without a skill)
P_DROP_HOW = 1.0  #: chance a non-complying episode drops each `how` step
P_WRONG, P_WRONG_FLOOR = 1.0, 0.45  #: wrong final answer: P_WRONG * (1 - p_conv) + P_WRONG_FLOOR
P_WRONG_NOHOW = 0.15  #: a non-complying, non-partial episode answers final_wrong with P_WRONG_NOHOW x P(wrong)
P_PARTIAL, A_PARTIAL, PARTIAL0 = 0.74, 5.4, 1.8  #: partial work: P_PARTIAL * sigmoid(A_PARTIAL * (PARTIAL0 - c))
PARTIAL_SKILL = 0.95  #: factor on the partial-work chance when the task's skill is in the prompt
P_GIVE_UP_WRONG = 0.96  #: a give-up answers final_wrong (else a generic give-up text) with this chance
SLIP = 0.25  #: scale of isolated malformed calls: SLIP * sigmoid(-capability)
GIVE_UP_TEXT = "I was not able to complete this task with the tools available."
READ_TOOLS = ("read_file", "list_files", "search_docs", "read_doc")
#: Per task class (the example suite's; other classes 0): difficulty added for every rung. A single-file code
#: change is four reference steps of routine reading and testing around one edit.
CLASS_DIFFICULTY = {"code_change": -0.5}
#: Per task class, the floor of the wrong-answer chance of a complied episode (others: P_WRONG_FLOOR): focused doc
#: retrieval reads the page that holds the answer.
CLASS_WRONG_FLOOR = {"doc_retrieval": 0.1}
P_WRONG_FLOOR_STATED = 0.1  #: the same floor at most, for a task whose instructions state the exact work (no skill)


def sigmoid(x: float) -> float:
    """The logistic function."""
    return 1.0 / (1.0 + math.exp(-x))


@dataclass(frozen=True)
class Action:
    """One planned emission: a tool call, a malformed call, or a final answer."""

    kind: str  #: call | malformed | final
    name: str = ""
    arguments: dict[str, Any] = field(default_factory=dict)
    text: str = ""


@dataclass(frozen=True)
class EpisodePlan:
    """An episode's plan: the actions in order, then `repeat` forever (loops) or the last final."""

    outcome: str  #: converge | give_up | loop | malformed | unknown_task
    actions: tuple[Action, ...]
    repeat: tuple[Action, ...] = ()  #: cycled after `actions` is exhausted (loop / malformed modes)
    complied: bool = True
    wrong: bool = False

    def action_at(self, position: int) -> Action:
        """The action for the `position`-th model call of the episode."""
        if position < len(self.actions):
            return self.actions[position]
        if self.repeat:
            return self.repeat[(position - len(self.actions)) % len(self.repeat)]
        return self.actions[-1] if self.actions else Action("final", text=GIVE_UP_TEXT)


def episode_seed(rung_seed: int, task_id: str, condition: str, request_seed: Any) -> int:
    """The seed of one episode's draws (stable across processes, unlike `hash()`)."""
    key = f"{rung_seed}\x1f{task_id}\x1f{condition}\x1f{request_seed}".encode()
    return int.from_bytes(hashlib.sha256(key).digest()[:8], "big")


def difficulty(task: Any) -> float:
    """Task difficulty on the capability scale: grows with the reference's length and the tools it combines."""
    steps = task.reference.steps if task.reference is not None else []
    tools = len({s.tool for s in steps})
    return D0 + DS * len(steps) + DT * max(tools - 1, 0) + CLASS_DIFFICULTY.get(getattr(task, "task_class", ""), 0.0)


def p_converge(capability: float, task: Any) -> float:
    """Probability that a rung of this capability converges on the task."""
    return sigmoid(A * (capability - difficulty(task)))


def p_comply(params: Any, task: Any, skill_in_prompt: bool) -> float:
    """Probability that a converging episode works the way it was told (keeps every `how` step)."""
    if not task.has_skill:
        return sigmoid(A_IF * (params.capability - IF0_STATED))
    attend = sigmoid(A_IF * (params.capability - IF0))
    know = P_GUESS
    if skill_in_prompt:
        know += (1 - P_GUESS) * params.skill_uptake * p_converge(params.capability, task)
    return know * attend


def p_partial(params: Any, task: Any, skill_in_prompt: bool) -> float:
    """Probability that a converging, non-complying episode does the work but hands back no answer.

    Smaller rungs do so more often; a skill in the prompt (which says how to deliver) makes it rarer."""
    p = P_PARTIAL * sigmoid(A_PARTIAL * (PARTIAL0 - params.capability))
    if task.has_skill and skill_in_prompt:
        p *= PARTIAL_SKILL
    return min(1.0, p)


def wrong_floor(task: Any) -> float:
    """The floor of a complied episode's wrong-answer chance: the class's (`CLASS_WRONG_FLOOR`, else
    `P_WRONG_FLOOR`), at most `P_WRONG_FLOOR_STATED` for a task whose instructions state what to do (no skill)."""
    floor = CLASS_WRONG_FLOOR.get(getattr(task, "task_class", ""), P_WRONG_FLOOR)
    return floor if task.has_skill else min(floor, P_WRONG_FLOOR_STATED)


def _is_read(step: Any) -> bool:
    if step.tool in READ_TOOLS:
        return True
    return step.tool.startswith("http") and str(step.arguments.get("method", "GET")).upper() == "GET"


def _call(step: Any) -> Action:
    return Action("call", step.tool, dict(step.arguments))


def make_plan(params: Any, task: Any | None, skill_in_prompt: bool, request_seed: Any, condition: str) -> EpisodePlan:
    """Draw the episode plan for a task (None = a task the stand-in does not know)."""
    if task is None or task.reference is None:
        return EpisodePlan("unknown_task", (Action("final", text=GIVE_UP_TEXT),))
    ref = task.reference
    rng = random.Random(episode_seed(params.seed, task.id, condition, request_seed))
    cap = params.capability
    pc = p_converge(cap, task)
    slip = SLIP * sigmoid(-cap)
    redundancy = getattr(params, "redundancy", 0.0)
    if rng.random() >= pc:
        return _failure(rng, ref, redundancy)
    steps = list(ref.steps)
    complied = rng.random() < p_comply(params, task, skill_in_prompt)
    p_wrong = min(1.0, P_WRONG * (1 - pc) + wrong_floor(task))
    outcome, wrong = "converge", False
    if complied:
        wrong = ref.final_wrong is not None and rng.random() < p_wrong
        final = ref.final_wrong if wrong else ref.final
    else:
        how = [i for i, s in enumerate(steps) if s.how]
        drop = {i for i in how if rng.random() < P_DROP_HOW}
        if how and not drop:
            drop = {rng.choice(how)}
        steps = [s for i, s in enumerate(steps) if i not in drop]
        if rng.random() < p_partial(params, task, skill_in_prompt):
            outcome, wrong, final = "partial", True, GIVE_UP_TEXT  # did the work, did not deliver it
        else:
            wrong = ref.final_wrong is not None and rng.random() < P_WRONG_NOHOW * p_wrong
            final = ref.final_wrong if wrong else (ref.final_sloppy or ref.final)
    actions: list[Action] = []
    done_reads: list[Any] = []
    for step in steps:
        if done_reads and rng.random() < redundancy:
            actions.append(_call(rng.choice(done_reads)))
        if rng.random() < slip:
            actions.append(Action("malformed", step.tool, dict(step.arguments)))
        actions.append(_call(step))
        if _is_read(step):
            done_reads.append(step)
    if done_reads and rng.random() < redundancy:  # a last check before answering
        actions.append(_call(rng.choice(done_reads)))
    actions = _unstick(actions)
    actions.append(Action("final", text=final))
    return EpisodePlan(outcome, tuple(actions), complied=complied, wrong=wrong)


def _unstick(actions: list[Action]) -> list[Action]:
    """Drop redundant calls that would make three identical calls in a row (the plan is not a loop)."""
    out: list[Action] = []
    for a in actions:
        if a.kind == "call" and len(out) >= 2 and out[-1] == a and out[-2] == a:
            continue
        out.append(a)
    return out


def _failure(rng: random.Random, ref: Any, redundancy: float) -> EpisodePlan:
    steps = list(ref.steps)
    mode = rng.choices(["give_up", "loop", "malformed"], [W_GIVE_UP, W_LOOP, W_MALFORMED])[0]
    k = rng.randint(0, max(0, min(2, len(steps) - 1)))  # a failing episode never completes the work
    actions = [_call(s) for s in steps[:k]]
    if mode == "give_up" or not steps:
        reads = [s for s in steps[:k] if _is_read(s)]
        if reads and rng.random() < redundancy:
            actions.append(_call(rng.choice(reads)))
        actions = _unstick(actions)
        text = ref.final_wrong if ref.final_wrong and rng.random() < P_GIVE_UP_WRONG else GIVE_UP_TEXT
        return EpisodePlan("give_up", tuple(actions) + (Action("final", text=text),),
                    complied=False, wrong=True)
    if mode == "loop":  # re-reading what it already has (a read step when there is one), alone or with another
        at = min(k, len(steps) - 1)
        reads = [i for i in range(at + 1) if _is_read(steps[i])]
        first = reads[-1] if reads else at
        a = _call(steps[first])
        if len(steps) > 1 and rng.random() < 0.5:
            others = [i for i in range(len(steps)) if i != first and _is_read(steps[i])] or [(first + 1) % len(steps)]
            b = _call(steps[rng.choice(others)])
            return EpisodePlan("loop", tuple(actions), repeat=(a, b) if a != b else (a,), complied=False, wrong=True)
        return EpisodePlan("loop", tuple(actions), repeat=(a,), complied=False, wrong=True)
    bad = steps[min(k, len(steps) - 1)]
    return EpisodePlan("malformed", tuple(actions), repeat=(Action("malformed", bad.tool, dict(bad.arguments)),),
                complied=False, wrong=True)

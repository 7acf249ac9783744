"""What a verifier is, and the registry of verifiers by name.

A verifier answers one question about one reply: accept it or not (`Verdict`, with why and what it cost). It
is built from a class's verifier config by the `VerifierKind` registered under a name in `VERIFIERS`; the
name is the config's ``type`` when it gives one, else ``judge`` when it names a judge, else ``checks``. The
builtin kinds are in `advisor.verifier.build`: ``checks`` (the suite's deterministic check types on the reply),
``judge`` (the ladder's judge role, after the checks when there are some) and ``task_completion`` (the probe's:
the task's own task-completion checks at the bar). docs/extending.md adds one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Protocol, runtime_checkable

from advisor.registry import Registry


@dataclass
class VerifiedText:
    """What a verifier reads of a reply: its final answer (None for a tool call) and its tool calls (name,
    arguments). The service's `advisor.service.api.chat.Reply` carries both; a stored probe run is read into one.
    A probe attempt also gives its whole `episode` (workspace, API log), which the task's checks read."""

    final: str | None
    calls: list[tuple[str, dict]]
    episode: Any = None


@dataclass
class Verdict:
    """What a verifier said about one reply."""

    accepted: bool
    detail: str
    cost_usd: float = 0.0  #: the judge's cost, when a judge verified
    undecided: bool = False  #: the verifier could not grade (it rejects; a measurement leaves it out)
    usable: bool | None = None  #: ``task_completion``: the attempt's full score reached the bar (None: unscored)


def judges(verifier: Any, reply: Any) -> bool:
    """Whether `verifier` judges `reply`: every final answer, and a tool-call step (a reply with calls and no
    answer) only when the verifier says it judges tool steps (``judges_tool_steps``, e.g. a ``tool_call`` check).
    A class's answer checks never turn a correct tool call into a rejection; the step check covers those."""
    if getattr(reply, "final", None) is not None or not getattr(reply, "calls", None):
        return True
    return bool(getattr(verifier, "judges_tool_steps", False))


@runtime_checkable
class ReplyVerifier(Protocol):
    """One verifier, built for one class (or one task). A verifier that judges tool-call steps too sets
    ``judges_tool_steps = True`` (see `judges`)."""

    async def verify(self, reply: VerifiedText, request_text: str) -> Verdict:
        """Accept or reject `reply` to the request `request_text`; never raises for a reply it cannot grade."""


@dataclass(frozen=True)
class VerifierContext:
    """What building a verifier may use: the ladder (its judge role) and the client of a ladder model."""

    ladder: Any = None
    client_for: Callable[[Any], Any] | None = None
    options: dict[str, Any] = field(default_factory=dict)  #: kind-specific settings (the probe's task and bar)


@dataclass(frozen=True)
class VerifierKind:
    """A registered verifier: `build(config, ctx)` makes one from a class's verifier config."""

    build: Callable[[Any, VerifierContext], ReplyVerifier]
    description: str = ""


#: Verifiers by name: a class config's ``verifier: {type: name}``.
VERIFIERS: Registry[VerifierKind] = Registry("verifier", builtins=("advisor.verifier.build",),
                                             entry_points="advisor.verifiers")


def kind_of(config: Any) -> str:
    """The registered name a verifier config asks for: its ``type``, else ``judge`` with a judge, else ``checks``."""
    return getattr(config, "type", None) or ("judge" if getattr(config, "judge", None) is not None else "checks")


def make_verifier(name: str, config: Any = None, ctx: VerifierContext = VerifierContext()) -> ReplyVerifier:
    """The verifier registered as `name`, built from `config` (UnknownNameError with did-you-mean when unknown)."""
    return VERIFIERS.get(name).build(config, ctx)

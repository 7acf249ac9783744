"""What answers a simulated rung inside the embedded Triton, by kind: the registry the server looks it up in.

The embedded server (`advisor.triton.server.EmbeddedTriton`) binds one responder per simulated rung, a function
``(prompt, sampling) -> Generation``, built by ``RESPONDERS.get(kind)(model, suite_paths)``. The stand-ins
(`advisor.standin`, kind ``standin``, declared as an entry point in pyproject.toml) register theirs; the registry
imports them on its first lookup, so the server, which stands below them, never imports them.
`advisor.agent.fake.FakeModel.standin` answers in-process with the same responders.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

from advisor.registry import Registry

#: kind -> (ladder model, suite paths) -> responder ``(prompt, sampling) -> Generation``.
RESPONDERS: Registry[Callable[[Any, Sequence[Any]], Callable[[str, dict], Any]]] = Registry(
    "simulated-model responder", entry_points="advisor.responders")


def standin_responder(model: Any, suite_paths: Sequence[Any] = ()) -> Callable[[str, dict], Any]:
    """The stand-in responder of `model` (a ladder model with a ``standin:`` block) knowing `suite_paths`."""
    return RESPONDERS.get("standin")(model, list(suite_paths))

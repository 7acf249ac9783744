"""The episodic routing policies the service serves as a ``model``, by name.

An episodic policy (`advisor.router.routing.policies.EpisodicPolicy`, registered in ``POLICIES``) routes inside a
conversation instead of deciding a rung chain up front, so the service cannot run it from a batch decision: it
serves one when a module registers a `ServedPolicy` under the policy's name in `SERVED`. Built in:
``orchestrator`` (`advisor.service.routing.orchestrated`: the ladder's orchestrator role picks the rung). A client asks for
one as its ``model``; `served_policies` lists those this ladder can serve (``GET /v1/models``, the 404 of an
unknown model). The request's plan takes the policy's name as its ``mode``, and `advisor.service.routing.dispatch.run`
hands such a plan to the policy's `run`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Awaitable, Callable

from advisor.registry import Registry
from advisor.router.routing.policies import episodic_policies


@dataclass(frozen=True)
class ServedPolicy:
    """How the service serves one episodic policy."""

    available: Callable[[Any], bool]  #: (runtime) -> whether this ladder can serve it (e.g. it has the role)
    plan: Callable[[Any, Any, Any], None]  #: (runtime, request, plan) -> fill the plan (RequestError when refused)
    run: Callable[[Any, Any, Any, float], Awaitable[Any]]  #: (runtime, request, plan, deadline) -> the Outcome


#: Served episodic policies by their `POLICIES` name; the built-in modules register theirs on the first lookup.
SERVED: Registry[ServedPolicy] = Registry("served policy", builtins=("advisor.service.routing.orchestrated",))


def served_policy(rt: Any, name: str) -> ServedPolicy | None:
    """The served policy `name` when this service can serve it on its ladder, else None."""
    if name not in SERVED:
        return None
    served = SERVED.get(name)
    return served if served.available(rt) else None


def served_policies(rt: Any) -> list[str]:
    """The names of the episodic policies this service serves on its ladder, sorted."""
    episodic = set(episodic_policies())
    return [name for name in SERVED.names() if name in episodic and SERVED.get(name).available(rt)]

"""Shadow mode: a candidate router decides every routed live request beside the serving one, recorded, not applied.

Configured in the service config::

    shadow: {artifact: routers/candidate.json}   # a router artifact (a path as the service's working dir sees it)

For every ``model: "auto"`` request the serving decision runs as always; then the candidate takes the same
decision (same text, class, policy settings and preferences, through `advisor.router.routing.route.route_one`) and its
first rung, chain, P(usable) and expected cost go into the decision row (``shadow_*`` columns). Nothing of it
reaches the answer. `advisor router shadow-report` (`advisor.router.feedback.shadow_report`) estimates what the candidate
would have cost and delivered on that traffic, and `advisor router promote --require-shadow` gates on it.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from advisor.errors import AdvisorError
from advisor.router.routing.route import route_one
from advisor.service.routing.reload import load_serving


class Shadow:
    """The candidate router of a worker (loaded once, at start)."""

    def __init__(self, path: str, ladder):
        self.serving = load_serving(path, ladder)

    @property
    def version(self) -> str:
        """The candidate's router version (recorded with every shadow decision)."""
        return self.serving.version




def shadow_decide(rt, plan, config, prefs) -> None:
    """The candidate's decision for a routed request, kept on the plan (`plan.shadow`) for its record; a
    candidate that cannot decide records its error instead (the request is never affected)."""
    sh = rt.shadow
    if sh is None:
        return
    model = sh.serving.model
    try:
        allowed = [n for n in prefs.allowed if n in model.rung_names]
        d = route_one(model, plan.text, plan.task_class, config, replace(prefs, allowed=allowed), policy=rt.policy_name,
                      explain=False)
        plan.shadow = {"shadow_version": sh.version, "shadow_rung": d.chain[0] if d.chain else None,
                       "shadow_chain_json": json.dumps(list(d.chain)), "shadow_p_usable": d.p_usable,
                       "shadow_expected_cost": d.expected_cost, "shadow_error": None}
    except (AdvisorError, ValueError, IndexError) as exc:
        plan.shadow = {"shadow_version": sh.version, "shadow_rung": None, "shadow_chain_json": None,
                       "shadow_p_usable": None, "shadow_expected_cost": None, "shadow_error": str(exc)[:500]}


def shadow_columns(plan) -> dict[str, Any]:
    """The shadow columns of a decision row (none without a shadow decision)."""
    return getattr(plan, "shadow", None) or {}

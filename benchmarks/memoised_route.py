"""Benchmark-only: a routing service whose decisions cost next to nothing (`service_overhead.py --memoised`).

`install()` wraps `advisor.service.routing.dispatch.route_one` so that it decides once per (router, text, class,
settings) and then returns that decision again. Every request of service_overhead.py has the same text and
settings, so the service then runs everything but the routing decision (the memo's key, the settings' text, is
still computed per request): the difference to the real service is what the decision costs inside the worker.
Never use it to serve: it is a benchmark's tool (a memo that never forgets, keyed on the whole prompt).
"""

from __future__ import annotations


def install() -> None:
    """Memoise the service's routing decisions in this process (call before the app starts)."""
    from advisor.service.routing import dispatch

    decide, memo = dispatch.route_one, {}

    def route_one(model, text, task_class, config, prefs=None, **kwargs):
        key = (id(model), text, task_class, repr(config), repr(prefs), repr(sorted(kwargs.items())))
        if key not in memo:
            memo[key] = decide(model, text, task_class, config, prefs, **kwargs)
        return memo[key]

    dispatch.route_one = route_one

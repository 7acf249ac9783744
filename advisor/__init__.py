"""advisor: find the smallest usable agent per task class on a Triton-served model ladder, write sizing
reports, and route live requests to the cheapest rung expected to pass the quality bar, counting retries.

Importing advisor has no side effects: no client is opened, no environment read, no argument parsed. The public
names below are imported on first use (PEP 562), so ``import advisor.errors`` loads the errors module and nothing
else of advisor.
"""

from __future__ import annotations

import importlib
from typing import Any

from advisor.version import __version__

#: public name -> the module that defines it
_EXPORTS = {
    **dict.fromkeys(("AdvisorError", "BackendError", "ConfigError", "DataError", "RouterError", "StoreError"),
                    "advisor.errors"),
    **dict.fromkeys(("Ladder", "Model", "load_ladder"), "advisor.ladder"),
    **dict.fromkeys(("Step", "Thresholds", "VerifierErrors", "chain_outcome", "overall_score"), "advisor.scores"),
    **dict.fromkeys(("RunRecord", "Store"), "advisor.store"),
    **dict.fromkeys(("Suite", "Task", "load_suite"), "advisor.suite"),
}

__all__ = [*_EXPORTS, "__version__"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'advisor' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)

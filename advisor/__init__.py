"""advisor: find the smallest usable agent per task class on a Triton-served model ladder, write sizing
reports, and route live requests to the cheapest rung expected to pass the quality bar, counting retries.

Importing advisor has no side effects: no client is opened, no environment read, no argument parsed.
"""

from advisor.errors import AdvisorError, BackendError, ConfigError, DataError, RouterError, StoreError
from advisor.ladder import Ladder, Model, load_ladder
from advisor.scores import Step, Thresholds, VerifierErrors, chain_outcome, overall_score
from advisor.store import RunRecord, Store
from advisor.suite import Suite, Task, load_suite
from advisor.version import __version__


__all__ = [
    "AdvisorError", "BackendError", "ConfigError", "DataError", "RouterError", "StoreError",
    "Ladder", "Model", "load_ladder",
    "Step", "Thresholds", "VerifierErrors", "chain_outcome", "overall_score",
    "RunRecord", "Store",
    "Suite", "Task", "load_suite",
    "__version__",
]

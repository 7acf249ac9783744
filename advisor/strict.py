"""The one strict base of advisor's pydantic models: what a file or a request says is taken as it is written.

Strict types (no bool for an int, no ``"3"`` for 3: a ladder, a suite, a service config and a request refuse
both alike), no field the model does not declare, no ``.inf`` or ``.nan``, and frozen (a model that must change
after validation says so with ``model_config = ConfigDict(frozen=False)``).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """Base class of every validated input model (ladder, suite, service config, chat request)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)

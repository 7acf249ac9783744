"""`advisor ladder check`: is every model of a ladder served, ready, on contract, and able to generate?

For each model (rungs and roles), in order: the server is reachable, the model is ready, its tensors and
policy match the vLLM backend contract, and one short generation returns text with token counts. The
orchestrator role then gets a tiny task with one tool, ``call_expert``, and must answer with a call of it in its
tool-call format (hermes) naming an offered expert alias (`advisor.orchestrator.formatcheck`). A model
fails at the first step that fails; the others still run. An unreachable server (every address down) is one
`BackendError`, not a table of failures.
"""

from __future__ import annotations

import asyncio
from dataclasses import asdict, dataclass

from advisor.backends import BackendOptions, BackendPool, KeyRefusedError
from advisor.errors import AdvisorError, BackendError, ContractError, did_you_mean
from advisor.orchestrator.formatcheck import format_probe, judge_reply

#: Prompt and budget of the check's one generation.
CHECK_PROMPT = "Reply with the single word OK."
CHECK_MAX_TOKENS = 8


@dataclass
class ModelCheck:
    """Outcome of checking one model of a ladder against a server."""

    name: str
    role: str  #: rung | orchestrator | judge
    model_id: str  #: the id the server knows the model by
    url: str
    reachable: bool = False
    ready: bool | None = None  #: None = not checked (an earlier step failed)
    contract: bool | None = None
    generated: bool | None = None
    input_tokens: int | None = None
    output_tokens: int | None = None
    tokens_from_server: bool | None = None
    latency_ms: float | None = None
    finish_reason: str | None = None
    text: str | None = None
    tool_format: bool | None = None  #: orchestrator role: answered the expert probe with a valid call (None: n/a)
    tool_call: str | None = None  #: the expert alias it called
    simulated: bool = False
    error: str | None = None

    @property
    def ok(self) -> bool:
        """True when every step passed (for the orchestrator role, the tool-call format check too)."""
        steps = self.reachable and self.ready and self.contract and self.generated
        return bool(steps and (self.role != "orchestrator" or self.tool_format))

    def to_dict(self) -> dict:
        """JSON-ready dict, with `ok`."""
        return {**asdict(self), "ok": self.ok}


def _roles(ladder) -> list[tuple[str, object]]:
    rows = [("rung", m) for m in ladder.rungs]
    rows += [(role, m) for role, m in (("orchestrator", ladder.roles.orchestrator), ("judge", ladder.roles.judge)) if m]
    return rows


async def _check_format(client, row: ModelCheck, ladder, model, timeout_s: float) -> None:
    """The orchestrator role's tool-call format: one expert probe, judged by `formatcheck.judge_reply`."""
    probe = format_probe(ladder, model)
    result = await client.generate(model.model_id, probe.prompt, max_tokens=int(model.max_output_tokens),
                                   sampling={"temperature": 0.0}, timeout_s=timeout_s)
    row.tool_call, why = judge_reply(probe, result.text, result.finish_reason)
    row.tool_format = why is None
    if why:
        message = f"orchestrator {probe.format_name} check: {why}; the reply began {result.text[:120]!r}"
        row.error = f"{row.error}; {message}" if row.error else message


async def _check_one(client, role: str, model, url: str, timeout_s: float, ladder) -> ModelCheck:
    row = ModelCheck(model.name, role, model.model_id, url, reachable=True, simulated=model.simulated)
    try:
        row.ready = await client.model_ready(model.model_id)
        if not row.ready:
            names = await client.repository_index()
            row.error = ("not ready (loading or failed)" if model.model_id in names
                         else f"not on this server.{did_you_mean(model.model_id, names)}")
            return row
        try:
            await client.check_contract(model.model_id)
            row.contract = True
        except ContractError as exc:
            row.contract, row.error = False, str(exc)
            return row
        result = await client.generate(model.model_id, CHECK_PROMPT, max_tokens=CHECK_MAX_TOKENS,
                                       timeout_s=timeout_s)
        row.generated = bool(result.output_tokens) or bool(result.text)
        row.input_tokens, row.output_tokens = result.input_tokens, result.output_tokens
        row.tokens_from_server, row.finish_reason = result.tokens_from_server, result.finish_reason
        row.latency_ms = round(result.latency_s * 1000, 1)
        row.text = result.text[:60]
        if not row.generated:
            row.error = "generation returned no text and no tokens"
        elif not result.tokens_from_server:
            row.error = result.note
        if row.generated and role == "orchestrator":
            await _check_format(client, row, ladder, model, timeout_s)
    except AdvisorError as exc:
        row.error = str(exc)
        if row.generated is None and row.contract:
            row.generated = False
    return row


async def check_ladder(ladder, url: str | None = None, *, protocol: str = "grpc",
                       timeout_s: float = 30.0) -> list[ModelCheck]:
    """Check every model of `ladder` on `url` (or each model's own address when None).

    Raises `BackendError` when no server of the ladder can be reached at all.
    """
    pool = BackendPool(ladder, url=url, options=BackendOptions(timeout_s=timeout_s, retries=1, protocol=protocol))
    rows = [(role, m, pool.endpoint(m)) for role, m in _roles(ladder)]
    clients = {u: pool(m) for _, m, u in rows}  # one per endpoint asked for reachability (shared or not)
    try:
        reachable: dict[str, str | None] = {}
        for u, client in clients.items():
            try:
                await client.repository_index()
                reachable[u] = None
            except KeyRefusedError:
                reachable[u] = None  # it answered: each model's own check names the refused key
            except BackendError as exc:
                reachable[u] = str(exc)
        if all(err is not None for err in reachable.values()):
            raise BackendError(next(iter(reachable.values())))
        checks = []
        for role, model, u in rows:
            if reachable[u] is not None:
                checks.append(_unreachable(role, model, u, reachable[u]))
            else:
                checks.append(_check_one(pool(model), role, model, u, timeout_s, ladder))
        return list(await asyncio.gather(*checks))
    finally:
        await pool.close()


async def _unreachable(role: str, model, url: str, error: str) -> ModelCheck:
    return ModelCheck(model.name, role, model.model_id, url, reachable=False, simulated=model.simulated,
                      error=error)

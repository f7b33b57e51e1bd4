"""A durable run's record of its ``agent()`` calls: what each was asked, next to what it answered.

:class:`CallLog` writes one ``calls`` row per call through the store's writer (queued and
batched like events, never awaited, so the hot path only encodes a little JSON) when the call
ends (its request, outcome, answer, failure, usage, start and end). A call that is still
queued or running after :data:`OPEN_WRITE_S` is written as it is by :meth:`CallLog.write_open`
(called by the engine's control poll), so a slow call's request can be read while it runs; a
fast call costs one row. A replayed call is written once, whole. A later row of the same call
replaces the earlier one.

The log learns of a call's answer through :class:`RecordingProvider`, which wraps the run's
provider, and of its end through the run's ``AgentEnded`` event (its outcome, usage and, when
the event carries it, its ``error``: the failure reason as ``{kind, message, details}``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from pydantic_core import PydanticSerializationError, to_json

from ..._store import CallRow, JournalEntry
from ..._store.encoding import text_or_none
from ..._subagent import (
    ProviderInfo,
    SubagentProvider,
    SubagentRequest,
    SubagentResult,
    Usage,
    provider_info,
)

__all__ = ["OPEN_WRITE_S", "CallLog", "RecordingProvider", "default_model", "encode_json"]

#: A call still open after this many seconds is written before it ends.
OPEN_WRITE_S = 0.2

_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def encode_json(value: Any) -> str | bytes:
    """JSON text of ``value`` as the store keeps it (a lone surrogate, which a script's text may
    carry, is kept as ``surrogatepass`` bytes)."""
    try:
        return to_json(value).decode()
    except PydanticSerializationError:
        text = _encode(value)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return text.encode("utf-8", "surrogatepass")
        return text


def default_model(provider: object, route: str | None) -> str | None:
    """The model a provider answers with when a call names none: its declared
    ``info.default_model``; for a provider whose record maps routes to models (a
    ``RoutingProvider``'s ``models``), the named route's (the default route's when ``route``
    is None); else None."""
    info = provider_info(provider)
    models = info.record.get("models")
    if isinstance(models, Mapping):
        name = route if route is not None else info.record.get("default")
        model = models.get(name) if isinstance(name, str) else None
        return model if isinstance(model, str) and model else None
    return info.default_model


def _options(request: SubagentRequest, used: str | None) -> dict[str, Any]:
    """The stored request: the prompt and every option that decides the answer (None left
    out); ``used`` is the model the child runs on."""
    options: dict[str, Any] = {"prompt": request.prompt}
    if request.schema is not None:
        options["schema"] = request.schema
    if request.model is not None:
        options["model"] = request.model
    if used is not None:
        options["model_used"] = used
    options.update((key, value) for key, value in (
        ("route", request.provider), ("effort", request.effort),
        ("agent_type", request.agent_type), ("isolation", request.isolation),
        ("max_output_tokens", request.max_output_tokens)) if value is not None)
    if request.agent is not None:
        options["agent"] = request.agent.model_dump(mode="json")
    return options


def _failure(value: object) -> dict[str, Any] | None:
    if value is None:
        return None
    if isinstance(value, BaseModel):
        dumped = value.model_dump(mode="json")
        return dumped if isinstance(dumped, dict) else {"message": str(dumped)}
    if isinstance(value, Mapping):
        return dict(value)
    return {"kind": "unknown", "message": str(value)}


@dataclass
class _Open:
    """A call that has not ended yet."""

    request: SubagentRequest
    options: str | bytes
    opened_at: float
    started_at: float | None = None
    result: SubagentResult | None = None
    written: float | None = None  # the started_at of the row written while open (-1: queued)


class CallLog:
    """The ``calls`` rows of one durable run (see the module docstring). ``post(rows)`` queues
    rows in the store; every method returns at once."""

    def __init__(self, post: Any, run_id: str, provider: object) -> None:
        self._post = post
        self._run_id = run_id
        self._provider = provider
        self._open: dict[int, _Open] = {}
        self._defaults: dict[str | None, str | None] = {}  # route -> the provider's model

    def _encoded(self, request: SubagentRequest) -> str | bytes:
        used = request.model
        if used is None:
            route = request.provider
            if route in self._defaults:
                used = self._defaults[route]
            else:
                used = self._defaults[route] = default_model(self._provider, route)
        return encode_json(_options(request, used))

    def wrap(self, provider: SubagentProvider) -> SubagentProvider:
        """``provider`` with every answer noted here."""
        return RecordingProvider(provider, self)

    def _row(self, seq: int, call: _Open, **fields: Any) -> CallRow:
        request = call.request
        return CallRow(self._run_id, seq, request.label, request.phase, call.options,
                       call.started_at, **fields)

    def opened(self, request: SubagentRequest, replay: JournalEntry | None) -> None:
        """An accepted call (``replay``: answered from an earlier run's journal)."""
        now = time.time()
        call = _Open(request, self._encoded(request), now)
        if replay is None:
            self._open[request.seq] = call
            return
        self._post([self._row(
            request.seq, call, ended_at=now, outcome="completed",
            text=text_or_none(replay.text),
            structured=None if replay.structured is None else encode_json(replay.structured),
            usage=None if replay.usage is None else encode_json(replay.usage),
            replayed=1)])

    def entered(self, request: SubagentRequest) -> None:
        """The provider was called for this request (its slot granted)."""
        call = self._open.get(request.seq)
        if call is None:
            return
        call.started_at = time.time()
        if request.max_output_tokens is not None:
            call.request = request
            call.options = self._encoded(request)

    def write_open(self, now: float | None = None) -> None:
        """Write the calls open for :data:`OPEN_WRITE_S` or longer whose row is missing or
        predates their start."""
        if not self._open:
            return
        now = time.time() if now is None else now
        rows = []
        for seq, call in self._open.items():
            state = -1.0 if call.started_at is None else call.started_at
            if call.written != state and now - call.opened_at >= OPEN_WRITE_S:
                call.written = state
                rows.append(self._row(seq, call))
        if rows:
            self._post(rows)

    def answered(self, seq: int, result: object) -> None:
        """What the provider returned (kept until the call's end is known)."""
        call = self._open.get(seq)
        if call is not None and isinstance(result, SubagentResult):
            call.result = result

    def ended(self, seq: int, outcome: str, usage: Usage | None, error: object,
              has_error: bool) -> None:
        """The call's end (from its ``AgentEnded`` event); ``has_error``: the event carries a
        failure reason (else one is made from what the provider returned)."""
        call = self._open.pop(seq, None)
        if call is None:
            return
        result = call.result
        failure = _failure(error) if has_error else self._made_failure(call, outcome)
        text = structured = None
        if result is not None:
            text = text_or_none(result.text)
            if result.structured is not None:
                try:
                    structured = encode_json(result.structured)
                except (TypeError, ValueError):
                    structured = None
        if usage is None and result is not None:
            usage = result.usage
        self._post([self._row(
            seq, call, ended_at=time.time(), outcome=outcome, text=text, structured=structured,
            failure=None if failure is None else encode_json(failure),
            usage=None if usage is None else encode_json(usage))])

    @staticmethod
    def _made_failure(call: _Open, outcome: str) -> dict[str, Any] | None:
        if outcome == "completed":
            return None
        if outcome == "timeout":
            return {"kind": "timeout", "message": "the child ran past agent_timeout_s"}
        if outcome == "cancelled":
            return {"kind": "cancelled", "message": "the child was cancelled"}
        result = call.result
        if result is None:
            return {"kind": "provider", "message": "the provider returned no result"}
        if result.stop_reason != "completed":
            return {"kind": "provider", "message": result.error or result.stop_reason}
        if result.structured is None and call.request.schema is not None:
            return {"kind": "missing", "message": "the child gave no structured value"}
        return {"kind": "invalid", "message": "the structured value did not validate"}

    def on_event(self, event: object, kind: str) -> None:
        """Feed a run event (``kind``: its class name) to the log."""
        if kind == "AgentEnded":
            self.ended(event.seq, event.outcome, event.usage,  # type: ignore[attr-defined]  # an AgentEnded
                       getattr(event, "error", None), hasattr(event, "error"))

    def close(self) -> None:
        """The run ended: calls that never ended (stopped while queued, or abandoned) are
        written as ``cancelled``."""
        rows = []
        for seq, call in sorted(self._open.items()):
            rows.append(self._row(seq, call, ended_at=time.time(), outcome="cancelled",
                                  failure=encode_json({
                                      "kind": "cancelled",
                                      "message": "the run stopped before the child ended"})))
        self._open.clear()
        if rows:
            self._post(rows)


class RecordingProvider:
    """A provider that tells a :class:`CallLog` when it is entered and what it returned;
    everything else (raises, cancellation) passes through untouched."""

    def __init__(self, provider: SubagentProvider, log: CallLog) -> None:
        self.inner = provider
        self._log = log

    @property
    def info(self) -> ProviderInfo:
        """The wrapped provider's declaration (the engine prices its children by it)."""
        return provider_info(self.inner)

    async def run(self, request: SubagentRequest) -> SubagentResult:
        log = self._log
        log.entered(request)
        result = await self.inner.run(request)
        log.answered(request.seq, result)
        return result

"""The telemetry seam: what an engine tells a tracer about its runs (docs/telemetry.md).

An engine given ``telemetry=`` calls a :class:`Telemetry` at fixed points of every run
(:mod:`dsh_workflow._engines.base` is the one place that does) and hands it every event of the
engine's hub; the OpenTelemetry implementation is
:class:`dsh_workflow.integrations.otel.OtelTelemetry`. Nothing here imports OpenTelemetry: the
engines, the providers and the core only speak this protocol and the W3C ``traceparent`` text.

Propagation: while a child's provider runs, :func:`child_traceparent` is the ``traceparent`` of
its agent span (a context variable set by :class:`TracedProvider`), so a provider puts it where
its child can read it (``TRACEPARENT`` in a command's environment, a ``traceparent`` header on
an HTTP request) without knowing about any tracer.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from ._subagent import (
    ProviderInfo,
    SubagentProvider,
    SubagentRequest,
    SubagentResult,
    provider_info,
)

if TYPE_CHECKING:
    from ._events import WorkflowEvent
    from ._meta import WorkflowMeta
    from ._result import WorkflowResult

__all__ = ["RunStart", "Telemetry", "TracedProvider", "child_context", "child_traceparent",
           "is_traceparent", "trace_env", "trace_headers", "traced_nesting"]

logger = logging.getLogger("dsh_workflow.engine")

_CHILD: ContextVar[str | None] = ContextVar("dsh_workflow_child_traceparent", default=None)

#: A W3C trace-context ``traceparent`` of version 00 (lower-case hex, ids not all zero).
_TRACEPARENT = re.compile(r"00-(?!0{32})[0-9a-f]{32}-(?!0{16})[0-9a-f]{16}-[0-9a-f]{2}")


def is_traceparent(text: object) -> bool:
    """True when ``text`` is a well-formed version-00 W3C ``traceparent``."""
    return isinstance(text, str) and _TRACEPARENT.fullmatch(text) is not None


def child_traceparent() -> str | None:
    """The ``traceparent`` of the agent span whose provider call is running in this context
    (None: no telemetry, or outside a child's call)."""
    return _CHILD.get()


def trace_env() -> dict[str, str]:
    """The environment variables that carry the running child's trace context to a command
    (``TRACEPARENT`` and ``OTEL_TRACEPARENT``); empty outside a traced child's call."""
    parent = _CHILD.get()
    if parent is None:
        return {}
    return {"TRACEPARENT": parent, "OTEL_TRACEPARENT": parent}


def trace_headers() -> dict[str, str]:
    """The HTTP header that carries the running child's trace context (``traceparent``);
    empty outside a traced child's call."""
    parent = _CHILD.get()
    return {} if parent is None else {"traceparent": parent}


@dataclass(frozen=True, slots=True, kw_only=True)
class RunStart:
    """A run about to start, as its trace sees it. ``provider`` is what the run's provider
    declares (its ``kind`` names the provider); ``resumed_from`` is the run this one resumes."""

    run_id: str
    meta: WorkflowMeta
    provider: ProviderInfo
    resumed_from: str | None = None


@runtime_checkable
class Telemetry(Protocol):
    """What an engine calls about its runs; every method is called on the event loop's thread,
    must not block and should not raise (an engine logs and ignores what one raises).

    The order for one run: :meth:`run_started` (before its ``WorkflowStarted``), then
    :meth:`observe` for each of its events, :meth:`child_call` around each provider call of a
    started child and :meth:`child_answered` for each result, at most one :meth:`run_linked`,
    and :meth:`run_ended` exactly once, after its last event and before the engine's
    ``async with`` block is left.
    """

    def run_started(self, start: RunStart) -> str | None:
        """Open the run's trace; returns its ``traceparent`` (kept with the run's
        ``WorkflowStarted`` so a later resume can link to it), or None."""

    def run_linked(self, run_id: str, traceparent: str) -> None:
        """The resumed run ``run_id`` continues the run whose trace is ``traceparent``."""

    def observe(self, event: WorkflowEvent) -> None:
        """An event of one of the engine's runs."""

    def child_call(self, request: SubagentRequest) -> AbstractContextManager[str | None]:
        """Entered around one provider call of the started child ``request.seq`` of
        ``request.run_id``; yields the ``traceparent`` its child should continue (or None)."""

    def child_answered(self, request: SubagentRequest, result: SubagentResult) -> None:
        """A provider call of that child returned ``result``."""

    def nested_workflow(self, run_id: str, call_id: int,
                        name: str | None) -> None:
        """The run's ``workflow()`` call ``call_id`` began the saved workflow ``name``, or
        ended (``name`` None)."""

    def run_ended(self, run_id: str, result: WorkflowResult | None) -> None:
        """The run settled with ``result`` (None: it ended without one, an engine failure):
        everything of its trace is ended."""


class TracedProvider:
    """``inner`` with each call run inside its child's trace context: the telemetry's
    :meth:`Telemetry.child_call` is entered around it, and :func:`child_traceparent` gives the
    agent span's ``traceparent`` while it runs. Results and exceptions pass through untouched."""

    def __init__(self, inner: SubagentProvider, telemetry: Telemetry) -> None:
        self.inner = inner
        self.telemetry = telemetry

    @property
    def info(self) -> ProviderInfo:
        """The wrapped provider's declaration."""
        return provider_info(self.inner)

    async def run(self, request: SubagentRequest) -> SubagentResult:
        with self.telemetry.child_call(request) as parent:
            token = _CHILD.set(parent if is_traceparent(parent) else None)
            try:
                result = await self.inner.run(request)
            finally:
                _CHILD.reset(token)
            if isinstance(result, SubagentResult):
                self.telemetry.child_answered(request, result)
            return result


def traced_nesting(telemetry: Telemetry, run_id: str) -> Callable[[int, str | None], None]:
    """What the run ``run_id`` calls when a ``workflow()`` call's saved workflow begins (its
    name) or ends (None): :meth:`Telemetry.nested_workflow`, whatever it raises logged."""

    def nested(call_id: int, name: str | None) -> None:
        try:
            telemetry.nested_workflow(run_id, call_id, name)
        except Exception:
            logger.exception("dsh-workflow: telemetry failed on run %s's workflow() call",
                             run_id)

    return nested


@contextmanager
def child_context(traceparent: str | None) -> Iterator[None]:
    """Make ``traceparent`` the running child's trace context for the block (for providers
    that run a child's call elsewhere, such as a Temporal worker's activity)."""
    token = _CHILD.set(traceparent if is_traceparent(traceparent) else None)
    try:
        yield
    finally:
        _CHILD.reset(token)

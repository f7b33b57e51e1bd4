"""A child's trace context through Temporal's activity headers (SPEC §27, docs/telemetry.md).

The run side (:class:`TraceHeaders`, a client interceptor :class:`TemporalProvider` adds to its
client) puts the running child's ``traceparent`` in the activity's header ``_tracer-data`` as
the carrier ``{"traceparent": ...}``: the header and the shape Temporal's own OpenTelemetry
interceptor reads, so a worker traced with it nests under the agent span. The worker side
(:class:`TraceContext`, a worker interceptor ``dsh-workflow worker`` installs) makes that
``traceparent`` the child's trace context while the activity runs, so the worker's provider
passes it on (``TRACEPARENT`` to a command, a ``traceparent`` header over HTTP).
"""

from __future__ import annotations

from typing import Any

from temporalio import client, converter, worker

from ..._telemetry import child_context, child_traceparent, is_traceparent

__all__ = ["HEADER", "TraceContext", "TraceHeaders", "traced_client"]

#: The activity header carrying the trace context (the one Temporal's tracing interceptor uses).
HEADER = "_tracer-data"


class _Outbound(client.OutboundInterceptor):
    async def start_activity(self, input: client.StartActivityInput) -> Any:
        parent = child_traceparent()
        if parent is not None:
            payload = converter.PayloadConverter.default.to_payloads([{"traceparent": parent}])[0]
            input.headers = {**input.headers, HEADER: payload}
        return await super().start_activity(input)


class TraceHeaders(client.Interceptor):
    """Client interceptor: each started activity carries the running child's trace context."""

    def intercept_client(self, next: client.OutboundInterceptor) -> client.OutboundInterceptor:
        return _Outbound(next)


def traced_client(given: client.Client) -> client.Client:
    """``given`` with :class:`TraceHeaders` among its interceptors (the same connection and
    settings; ``given`` itself when it has one already)."""
    config = given.config()
    if any(isinstance(each, TraceHeaders) for each in config["interceptors"]):
        return given
    config["interceptors"] = [*config["interceptors"], TraceHeaders()]
    return client.Client(**config)


def header_traceparent(headers: Any) -> str | None:
    """The ``traceparent`` an activity's headers carry, when well-formed."""
    payload = headers.get(HEADER) if headers else None
    if payload is None:
        return None
    try:
        [carrier] = converter.PayloadConverter.default.from_payloads([payload])
    except Exception:  # noqa: BLE001 - a foreign or broken header is ignored
        return None
    parent = carrier.get("traceparent") if isinstance(carrier, dict) else None
    return parent if is_traceparent(parent) else None


class _Inbound(worker.ActivityInboundInterceptor):
    async def execute_activity(self, input: worker.ExecuteActivityInput) -> Any:
        with child_context(header_traceparent(input.headers)):
            return await super().execute_activity(input)


class TraceContext(worker.Interceptor):
    """Worker interceptor: an activity runs in the trace context its headers carry."""

    def intercept_activity(self, next: worker.ActivityInboundInterceptor
                           ) -> worker.ActivityInboundInterceptor:
        return _Inbound(next)

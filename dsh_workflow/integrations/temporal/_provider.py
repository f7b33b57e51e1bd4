"""``TemporalProvider``: each ``agent()`` call runs as a Temporal activity on a task queue.

Contract (docs/temporal.md):

- ``TemporalProvider(client, task_queue, ...)`` takes a connected ``temporalio.client.Client``
  and a non-empty task queue name; anything else is a ``TypeError`` or ``ValueError`` at
  construction, as is an invalid timeout or retry policy.
- ``run(request)`` starts one *standalone activity* (no workflow around it) of type
  :data:`~._wire.CHILD_ACTIVITY` on the queue, with id ``dsh-workflow/<run id>/<seq>`` (a
  start the client repeats attaches to the running activity rather than starting a second),
  and waits for its result: text, structured value and usage come back as the worker's
  provider gave them. Structured output is *not* validated here; the engine validates it as it
  does for any provider.
- Timeouts: ``agent_timeout_s`` is the start-to-close timeout of each attempt (default
  :data:`DEFAULT_ATTEMPT_TIMEOUT_S` when None); ``heartbeat_timeout_s`` is how long a silent
  attempt (its worker killed or cut off) lives before the server retries it elsewhere;
  ``schedule_to_close_timeout_s`` optionally bounds the whole call, retries and queueing
  included. ``retry_policy`` defaults to :data:`DEFAULT_RETRY_POLICY`.
- Outcomes: a completed activity gives its result. An activity that timed out (every attempt
  used up) is an ordinary child failure with ``stop_reason="timeout"`` (``error_kind``
  ``timeout``); one cancelled by someone else is ``stop_reason="cancelled"`` (``other``). A
  worker's failed result keeps its provider's ``error_kind`` and ``retry_at`` (the wire carries
  every field), so the engine decides on it as on a local one. An activity that failed because the worker's
  provider raised (after its retries) raises :class:`TemporalChildError` — an infrastructure
  fault, as the same provider raising locally would be. The Temporal service failing to
  answer (gone, unreachable, refusing) raises :class:`TemporalUnavailableError` within the
  client's own RPC retry window, so a run never hangs on a server that went away.
- Cancellation (the engine cancelling the call, the run or its dispose) asks the server to
  cancel the activity, shielded and bounded by ``cancel_grace_s``, then propagates; the worker
  receives the request at its next heartbeat and kills the child.
- The Temporal SDK is asyncio-only: ``run`` under any other backend raises ``RuntimeError``.
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import Literal, overload

import anyio
import sniffio
from temporalio.client import ActivityFailureError, Client
from temporalio.common import ActivityIDConflictPolicy, RetryPolicy
from temporalio.exceptions import ApplicationError, CancelledError, TimeoutError
from temporalio.service import RPCError

from ..._subagent import ProviderInfo, SubagentRequest, SubagentResult
from ._tracing import traced_client
from ._wire import CHILD_ACTIVITY, activity_id, request_to_wire, result_from_wire

__all__ = ["DEFAULT_ATTEMPT_TIMEOUT_S", "DEFAULT_RETRY_POLICY", "TemporalChildError",
           "TemporalProvider", "TemporalUnavailableError"]

DEFAULT_ATTEMPT_TIMEOUT_S = 6 * 3600.0
"""Start-to-close timeout of one attempt when ``agent_timeout_s`` is None: long, because a
lost worker is noticed by the heartbeat timeout, not by this one."""

DEFAULT_RETRY_POLICY = RetryPolicy(initial_interval=timedelta(seconds=1), backoff_coefficient=2.0,
                                   maximum_interval=timedelta(seconds=30), maximum_attempts=5)
"""Five attempts: enough to survive lost workers, few enough that a child whose provider
keeps raising ends the run instead of retrying forever."""


class TemporalChildError(RuntimeError):
    """The worker's provider raised for this child on its last attempt (an infrastructure
    fault: the engine turns it into a fatal ``AGENT_FAILED``)."""


class TemporalUnavailableError(RuntimeError):
    """The Temporal service did not answer: the call cannot start or finish."""


@overload
def _positive(name: str, value: float | None, *, optional: Literal[True]) -> float | None: ...
@overload
def _positive(name: str, value: float | None, *, optional: Literal[False]) -> float: ...
def _positive(name: str, value: float | None, *, optional: bool) -> float | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
            or value <= 0:
        raise ValueError(f"{name} must be a finite number of seconds > 0, got {value!r}")
    return float(value)


class TemporalProvider:
    """A :class:`~dsh_workflow.SubagentProvider` that runs every child on a Temporal task
    queue, served by ``dsh-workflow worker`` processes (see the module doc)."""

    def __init__(self, client: Client, task_queue: str, *, agent_timeout_s: float | None = None,
                 heartbeat_timeout_s: float = 10.0,
                 schedule_to_close_timeout_s: float | None = None,
                 retry_policy: RetryPolicy | None = None, cancel_grace_s: float = 5.0) -> None:
        if not isinstance(client, Client):
            raise TypeError("client must be a connected temporalio.client.Client (from "
                            f"`await Client.connect(...)`), got {type(client).__name__}")
        if not isinstance(task_queue, str) or not task_queue.strip():
            raise ValueError(f"task_queue must be a non-empty string, got {task_queue!r}")
        if retry_policy is not None and not isinstance(retry_policy, RetryPolicy):
            raise TypeError("retry_policy must be a temporalio.common.RetryPolicy, got "
                            f"{type(retry_policy).__name__}")
        self.client = traced_client(client)  # activities carry the child's trace context
        self.task_queue = task_queue
        self.attempt_timeout_s = _positive("agent_timeout_s", agent_timeout_s, optional=True) \
            or DEFAULT_ATTEMPT_TIMEOUT_S
        self.heartbeat_timeout_s = _positive("heartbeat_timeout_s", heartbeat_timeout_s,
                                             optional=False)
        self.schedule_to_close_timeout_s = _positive(
            "schedule_to_close_timeout_s", schedule_to_close_timeout_s, optional=True)
        self.cancel_grace_s = _positive("cancel_grace_s", cancel_grace_s, optional=False)
        self.retry_policy = retry_policy or DEFAULT_RETRY_POLICY

    @property
    def identity(self) -> str:
        """What answers this provider's calls, for durable runs' journal keys (docs/durable-runs.md)."""
        return f"temporal:{self.client.namespace}/{self.task_queue}"

    @property
    def info(self) -> ProviderInfo:
        """What this provider declares: kind ``temporal``, its namespace and task queue as
        identity and record, no default model (the workers' provider picks it)."""
        return ProviderInfo(
            kind="temporal", identity=self.identity, default_model=None,
            description=(f"a child on Temporal task queue {self.task_queue!r} (namespace "
                         f"{self.client.namespace!r}), answered by the provider of the "
                         "`dsh-workflow worker` serving it"),
            record={"kind": "temporal", "namespace": self.client.namespace,
                    "task_queue": self.task_queue})

    def __repr__(self) -> str:
        return f"TemporalProvider(namespace={self.client.namespace!r}, task_queue={self.task_queue!r})"

    async def run(self, request: SubagentRequest) -> SubagentResult:
        backend = sniffio.current_async_library()
        if backend != "asyncio":
            raise RuntimeError(f"TemporalProvider needs the asyncio backend (the Temporal SDK is "
                               f"asyncio-only); this run is on {backend}")
        schedule_to_close = (timedelta(seconds=self.schedule_to_close_timeout_s)
                             if self.schedule_to_close_timeout_s is not None else None)
        ident = activity_id(request.run_id, request.seq)
        try:
            handle = await self.client.start_activity(
                CHILD_ACTIVITY, request_to_wire(request), id=ident, task_queue=self.task_queue,
                start_to_close_timeout=timedelta(seconds=self.attempt_timeout_s),
                schedule_to_close_timeout=schedule_to_close,
                heartbeat_timeout=timedelta(seconds=self.heartbeat_timeout_s),
                retry_policy=self.retry_policy,
                id_conflict_policy=ActivityIDConflictPolicy.USE_EXISTING,
                summary=request.label[:200])
        except RPCError as exc:
            raise TemporalUnavailableError(
                f"could not start child #{request.seq} on Temporal task queue "
                f"{self.task_queue!r}: {exc}") from None
        try:
            data = await handle.result()
        except ActivityFailureError as exc:
            return self._failed(request, exc)
        except RPCError as exc:
            raise TemporalUnavailableError(
                f"lost Temporal while child #{request.seq} ({ident}) ran: {exc}") from None
        except BaseException:
            with anyio.move_on_after(self.cancel_grace_s, shield=True):
                try:
                    await handle.cancel(reason="the workflow run cancelled this child")
                except RPCError:
                    pass  # the server is gone or the activity already closed: nothing to stop
            raise
        try:
            return result_from_wire(data)
        except ValueError as exc:
            raise TemporalChildError(f"child #{request.seq} came back malformed from its worker: "
                                     f"{exc}") from None

    def _failed(self, request: SubagentRequest, exc: ActivityFailureError) -> SubagentResult:
        cause = exc.cause
        if isinstance(cause, TimeoutError):
            kind = cause.type.name if cause.type is not None else "unspecified"
            return SubagentResult(stop_reason="timeout", error_kind="timeout",
                                  error=f"the child timed out on Temporal ({kind})")
        if isinstance(cause, CancelledError):
            return SubagentResult(stop_reason="cancelled", error_kind="other",
                                  error="the child's activity was cancelled outside this run")
        if isinstance(cause, ApplicationError):
            raise TemporalChildError(f"child #{request.seq} failed on its worker "
                                     f"({cause.type or 'error'}): {cause.message}") from None
        raise TemporalChildError(f"child #{request.seq} failed on Temporal: {cause or exc}") from None

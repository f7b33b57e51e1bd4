"""The worker's side of a child: the activity that runs one request with a local provider.

Contract of :class:`ChildActivity`:

- ``activity`` (registered under :data:`~._wire.CHILD_ACTIVITY`) decodes the request, runs it
  with the local provider and returns the result as JSON data. An ordinary child failure is a
  completed activity whose result says so; only a provider that raises fails the activity
  (with the provider's message, retried by the caller's retry policy).
- While the provider runs, the activity heartbeats every ``heartbeat_every_s`` seconds, so the
  server notices a lost worker within the caller's heartbeat timeout and retries the child
  elsewhere, and so cancellation requested by the caller reaches the activity.
- Cancellation requested by the caller cancels the provider (a command child is killed) and the
  activity ends as cancelled. Cancellation because this worker shuts down (its grace over)
  cancels the provider too, but ends the attempt as a retryable failure, so the child is handed
  back and runs again on another worker.
- ``report`` receives one line per start and per end (progress for the worker's operator).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from temporalio import activity
from temporalio.exceptions import ApplicationError

from ..._subagent import SubagentProvider
from ._wire import CHILD_ACTIVITY, request_from_wire, result_to_wire

__all__ = ["WORKER_SHUTDOWN_ERROR", "ChildActivity"]

WORKER_SHUTDOWN_ERROR = "WorkerShutdown"
"""Error type of an attempt handed back because its worker shut down."""


@dataclass
class ChildActivity:
    """Runs children for Temporal with ``provider`` (see the module doc)."""

    provider: SubagentProvider
    report: Callable[[str], None] = lambda line: None
    heartbeat_every_s: float = 1.0
    running: dict[str, str] = field(default_factory=dict)  # activity id -> label, for progress

    @activity.defn(name=CHILD_ACTIVITY)
    async def activity(self, payload: Any) -> dict[str, Any]:
        info = activity.info()
        try:
            request = request_from_wire(payload)
        except ValueError as exc:
            raise ApplicationError(f"not a child request: {exc}", type="BadRequest",
                                   non_retryable=True) from None
        name = f"{request.label!r} (run {request.run_id}, #{request.seq}, attempt {info.attempt})"
        self.running[info.activity_id] = request.label
        self.report(f"started {name}")
        started = time.monotonic()
        outcome = "failed"
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(self._heartbeat)
                result = await self.provider.run(request)
                tg.cancel_scope.cancel()
            outcome = result.stop_reason
            return result_to_wire(result)
        except asyncio.CancelledError:
            details = activity.cancellation_details()
            if details is not None and details.worker_shutdown and not details.cancel_requested:
                outcome = "handed back (worker shutting down)"
                raise ApplicationError("the worker running this child shut down",
                                       type=WORKER_SHUTDOWN_ERROR) from None
            outcome = "cancelled"
            raise
        except Exception as exc:
            outcome = f"failed: {type(exc).__name__}: {exc}"
            raise
        finally:
            self.running.pop(info.activity_id, None)
            self.report(f"finished {name}: {outcome} in {time.monotonic() - started:.2f}s "
                        f"({len(self.running)} running)")

    async def _heartbeat(self) -> None:
        while True:
            activity.heartbeat()
            await anyio.sleep(self.heartbeat_every_s)

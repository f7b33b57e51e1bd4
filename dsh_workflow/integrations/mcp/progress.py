"""One run's events as MCP progress notifications.

Contract: :class:`ProgressReporter` is an event listener (subscribe it to the engine that runs
the call) plus a :meth:`~ProgressReporter.pump` task that sends what changed. Notifications are
coalesced: the first change is sent at once, later ones at most once per ``interval`` seconds
(the latest state wins), and :meth:`~ProgressReporter.flush` sends the final state if it was not
sent yet. Each notification's ``progress`` is one more than the previous one (MCP requires it to
increase), ``total`` is unset (a workflow does not know how many agents it will start), and its
``message`` reads ``phase: <title>; <done>/<started> agents done[ (<n> failed)]``, ending with
``workflow <stop_reason>`` once the run ended.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import anyio

from ..._events import (
    AgentEnded,
    AgentReplayed,
    AgentStarted,
    PhaseStarted,
    WorkflowEnded,
    WorkflowEvent,
)

__all__ = ["ProgressReporter", "ProgressSnapshot", "SendProgress"]

#: ``send(progress, total, message)``: one ``notifications/progress`` for the call.
SendProgress = Callable[[float, float | None, str], Awaitable[None]]

#: Seconds between two notifications of one call, at least.
DEFAULT_INTERVAL_S = 0.1


@dataclass
class ProgressSnapshot:
    """What a progress message tells: the phase and the agent counts so far."""

    phase: str | None = None
    started: int = 0
    done: int = 0
    failed: int = 0
    ended: str | None = None

    def message(self) -> str:
        parts = [f"phase: {self.phase}"] if self.phase else []
        counts = f"{self.done}/{self.started} agents done"
        if self.failed:
            counts += f" ({self.failed} failed)"
        parts.append(counts)
        if self.ended:
            parts.append(f"workflow {self.ended}")
        return "; ".join(parts)


class ProgressReporter:
    """Listener + sender for one call's progress (see the module docstring)."""

    def __init__(self, send: SendProgress, *, interval: float = DEFAULT_INTERVAL_S) -> None:
        self._send = send
        self._interval = interval
        self.snapshot = ProgressSnapshot()
        self._changes = 0
        self._sent_changes = 0
        self._steps = 0
        self._wake = anyio.Event()

    def __call__(self, event: WorkflowEvent) -> None:
        state = self.snapshot
        if isinstance(event, PhaseStarted):
            state.phase = event.title
        elif isinstance(event, AgentStarted):
            state.started += 1
        elif isinstance(event, AgentEnded):
            state.done += 1
            state.failed += event.outcome != "completed"
        elif isinstance(event, AgentReplayed):
            state.started += 1
            state.done += 1
        elif isinstance(event, WorkflowEnded):
            state.ended = event.stop_reason
        else:
            return
        self._changes += 1
        self._wake.set()

    async def pump(self) -> None:
        """Send changes as they come, coalesced; runs until cancelled."""
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            await self._send_now()
            await anyio.sleep(self._interval)

    async def flush(self) -> None:
        """Send the latest state if it has not been sent."""
        if self._changes != self._sent_changes:
            await self._send_now()

    async def _send_now(self) -> None:
        self._sent_changes = self._changes
        self._steps += 1
        await self._send(float(self._steps), None, self.snapshot.message())

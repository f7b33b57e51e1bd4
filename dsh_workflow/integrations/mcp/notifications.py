"""One run's events as MCP progress notifications.

Contract: :class:`ProgressNotifier` is an event listener (subscribe it to the engine that runs
the call) plus a :meth:`~ProgressNotifier.pump` task that sends what changed. Notifications are
coalesced: the first change is sent at once, later ones at most once per ``interval`` seconds
(the latest state wins), and :meth:`~ProgressNotifier.flush` sends the final state if it was not
sent yet. Each notification's ``progress`` is one more than the previous one (MCP requires it to
increase), ``total`` is unset (a workflow does not know how many agents it will start), and its
``message`` reads ``phase: <title>; <done>/<started> agents done[ (<n> failed, <m>
cancelled)]``, ending with ``workflow <stop_reason>`` once the run ended.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio

from ..._events import WorkflowEvent
from ..._tally import RunTally

__all__ = ["ProgressNotifier", "SendNotification", "notification_message"]

#: ``send(progress, total, message)``: one ``notifications/progress`` for the call.
SendNotification = Callable[[float, float | None, str], Awaitable[None]]

#: Seconds between two notifications of one call, at least.
DEFAULT_INTERVAL_S = 0.1


def notification_message(tally: RunTally) -> str:
    """The message of a notification for what ``tally`` counted (see the module docstring): a
    replayed call counts as an agent started and done."""
    parts = [f"phase: {tally.phase}"] if tally.phase else []
    started = tally.started + tally.replayed
    done = tally.finished + tally.replayed
    counts = f"{done}/{started} agents done"
    if tally.unsuccessful:
        said = [f"{count} {what}" for count, what in ((tally.failed, "failed"),
                                                       (tally.cancelled, "cancelled")) if count]
        counts += f" ({', '.join(said)})"
    parts.append(counts)
    if tally.ended is not None:
        parts.append(f"workflow {tally.ended.stop_reason}")
    return "; ".join(parts)


class ProgressNotifier:
    """Listener + sender of one call's progress notifications (see the module docstring)."""

    def __init__(self, send: SendNotification, *, interval: float = DEFAULT_INTERVAL_S) -> None:
        self._send = send
        self._interval = interval
        self.tally = RunTally()
        self._changes = 0
        self._sent_changes = 0
        self._steps = 0
        self._wake = anyio.Event()

    def __call__(self, event: WorkflowEvent) -> None:
        if self.tally.record(event):
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
        await self._send(float(self._steps), None, notification_message(self.tally))

"""What one run's live events have said so far: the one count every progress view reads.

The CLI's progress panel, a background run's status and the MCP server's progress
notifications are all views of a :class:`RunTally`; only how they show it differs.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field

from ._events import (
    AgentEnded,
    AgentOutcome,
    AgentReplayed,
    AgentStarted,
    LogEmitted,
    PhaseStarted,
    WorkflowEnded,
    WorkflowEvent,
    WorkflowStarted,
)

__all__ = ["RunTally"]


@dataclass(eq=False)
class RunTally:
    """Counts of one run's events, fed in order to :meth:`record` (events of one run only).

    ``tokens`` is what the children reported so far, ``cost_usd`` the sum of their known costs
    (None while none is known) and ``unpriced`` how many reported tokens without a known cost;
    the run's end replaces ``tokens`` and ``cost_usd`` with the totals the run reports. ``logs`` keeps the last
    ``log_lines`` log messages (none by default).
    Times are ``time.monotonic()`` readings.
    """

    log_lines: int = 0
    name: str = ""
    phase: str | None = None
    running: dict[int, str] = field(default_factory=dict)  # seq -> label of started children
    started: int = 0  # children started (AgentStarted)
    replayed: int = 0  # calls answered from an earlier run's journal (AgentReplayed)
    outcomes: dict[AgentOutcome, int] = field(default_factory=lambda: {
        "completed": 0, "failed": 0, "cancelled": 0, "timeout": 0})
    tokens: int = 0
    cost_usd: float | None = None
    unpriced: int = 0
    logs: deque[str] = field(init=False)
    began: float = field(default_factory=time.monotonic)
    ended: WorkflowEnded | None = None
    ended_at: float | None = None

    def __post_init__(self) -> None:
        self.logs = deque(maxlen=self.log_lines)

    def record(self, event: WorkflowEvent) -> bool:
        """Count ``event``; True when it changed the phase, an agent count or the end (a log
        line or the start returns False)."""
        if isinstance(event, AgentStarted):
            self.started += 1
            self.running[event.seq] = event.label
        elif isinstance(event, AgentEnded):
            self.running.pop(event.seq, None)
            self.outcomes[event.outcome] += 1
            if event.usage is not None:
                self.tokens += event.usage.total_tokens
                self.unpriced += event.usage.unpriced
                if event.usage.cost_usd is not None:
                    self.cost_usd = (self.cost_usd or 0.0) + event.usage.cost_usd
        elif isinstance(event, PhaseStarted):
            self.phase = event.title
        elif isinstance(event, AgentReplayed):
            self.replayed += 1
        elif isinstance(event, WorkflowEnded):
            self.ended = event
            self.tokens = event.usage.total_tokens
            self.cost_usd = event.usage.cost_usd
            self.ended_at = time.monotonic()
        elif isinstance(event, LogEmitted):
            self.logs.append(event.message)
            return False
        elif isinstance(event, WorkflowStarted):
            self.name = event.run.meta.name
            self.began = time.monotonic()
            return False
        return True

    @property
    def finished(self) -> int:
        """Started children that have ended, whatever their outcome."""
        return sum(self.outcomes.values())

    @property
    def failed(self) -> int:
        """Started children that ended other than completed or cancelled (failed, timed
        out): what ``agents_failed`` counts."""
        return self.finished - self.outcomes["completed"] - self.outcomes["cancelled"]

    @property
    def cancelled(self) -> int:
        """Started children the run's stop cancelled (``agents_cancelled``)."""
        return self.outcomes["cancelled"]

    @property
    def unsuccessful(self) -> int:
        """Started children that ended other than completed (failed, cancelled, timed out)."""
        return self.finished - self.outcomes["completed"]

    def elapsed(self) -> float:
        """Seconds from the start to the end (or to now, while the run goes on)."""
        return (self.ended_at if self.ended_at is not None else time.monotonic()) - self.began

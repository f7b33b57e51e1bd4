"""What one run's events have said so far: the one count of live events every progress view
reads, and the one count of stored events.

The CLI's progress panel, a background run's status and the MCP server's progress
notifications are all views of a :class:`RunTally`; only how they show it differs. A stored
run's events (``runs``/``show`` for a run whose totals are not in yet, the viewer's run list)
are counted by :func:`count_stored` alone.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

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

__all__ = ["RunTally", "StoredCounts", "count_stored"]


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


class _Stored(Protocol):
    """A stored event as the store gives it back: ``{"event": <class name>, ...fields}``."""

    @property
    def data(self) -> Mapping[str, Any]: ...


@dataclass(frozen=True)
class StoredCounts:
    """A run's counts as its stored events tell them: children started (``agents``), calls
    replayed from a journal, children that failed (neither completed nor cancelled) and
    children cancelled; the tokens the children reported, the sum of their known costs (None
    while none is known) and how many reported tokens without a cost (``unpriced``)."""

    agents: int = 0
    replayed: int = 0
    failed: int = 0
    cancelled: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    unpriced: int = 0

    @property
    def tokens(self) -> int:
        """Input and output tokens together."""
        return self.input_tokens + self.output_tokens


def _whole(value: object) -> int:
    """A count from stored event data (which a foreign writer may have filled with anything)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def count_stored(events: Iterable[_Stored], start: StoredCounts = StoredCounts()) -> StoredCounts:
    """The counts of a run's stored ``events``, added to ``start`` (the counts of the events
    before them), so a run can be counted a page at a time.

    Never raises on what a foreign writer stored: an unknown event, outcome or usage counts
    as nothing, a count that is not a whole number as 0, a cost that is not a number as unknown.
    """
    agents, replayed, failed, cancelled = start.agents, start.replayed, start.failed, start.cancelled
    input_tokens, output_tokens = start.input_tokens, start.output_tokens
    cost, unpriced = start.cost_usd, start.unpriced
    for stored in events:
        data = stored.data
        kind = data.get("event")
        if kind == "AgentStarted":
            agents += 1
        elif kind == "AgentReplayed":
            replayed += 1
        elif kind == "AgentEnded":
            outcome = data.get("outcome")
            cancelled += outcome == "cancelled"
            failed += outcome not in ("completed", "cancelled")
            usage = data.get("usage")
            if not isinstance(usage, Mapping):
                continue
            spent_in, spent_out = _whole(usage.get("input_tokens")), _whole(usage.get("output_tokens"))
            input_tokens, output_tokens = input_tokens + spent_in, output_tokens + spent_out
            child_cost = usage.get("cost_usd")
            if isinstance(child_cost, int | float) and not isinstance(child_cost, bool):
                cost = (cost or 0.0) + child_cost
            elif spent_in + spent_out:
                unpriced += 1
    return StoredCounts(agents=agents, replayed=replayed, failed=failed, cancelled=cancelled,
                        input_tokens=input_tokens, output_tokens=output_tokens, cost_usd=cost,
                        unpriced=unpriced)

"""A run page's first paint, rendered by the server: the tree of phases and agents, the counts
and the log as the stored events leave them, so the page shows real numbers before its script
runs. The script (``static/run.js``) takes the rendered rows over and continues the event
stream after :attr:`PageState.last_seq`.

It reads events the way the script does: an agent belongs to its call's phase (``(no
phase)`` without one); a phase appears with its first agent (a phase without agents has no
table); an agent with no end in a run that is no longer running is ``interrupted``; a failed
agent's reason is its ``AgentEnded`` event's ``error`` (``{kind, message, details}``), else
the reason its call's record holds.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .._store import CallBrief, RunRecord, SQLiteRunStore, StoredEvent
from .summary import format_duration

__all__ = ["NO_PHASE", "AgentView", "PageState", "PhaseView", "default_model", "first_paint",
           "page_state", "reason_text"]

NO_PHASE = "(no phase)"
#: The longest reason a tree row shows (its tooltip holds the whole of it).
REASON_CHARS = 160


def reason_text(error: Any) -> str:
    """A failure reason (``{kind, message, details}``) as one line: ``kind: message``."""
    if not isinstance(error, Mapping):
        return "" if error is None else str(error)
    kind, message = error.get("kind"), error.get("message")
    text = " ".join(str(message or "").split())
    details = error.get("details")
    if isinstance(details, list) and details:
        text += " (" + "; ".join(" ".join(str(d).split()) for d in details[:5]) + ")"
    return f"{kind}: {text}" if kind else text


@dataclass
class AgentView:
    """One row of the tree."""

    seq: int
    label: str
    phase: str
    status: str
    start: float
    end: float | None = None
    tokens: int | None = None
    model: str | None = None
    replayed: bool = False
    reason: str = ""

    @property
    def short_reason(self) -> str:
        if len(self.reason) <= REASON_CHARS:
            return self.reason
        return self.reason[:REASON_CHARS - 1] + "…"

    def elapsed(self, now: float) -> str:
        if self.replayed:
            return "—"
        return format_duration(max(0.0, (self.end if self.end is not None else now)
                                   - self.start))


@dataclass
class PhaseView:
    title: str
    agents: list[AgentView] = field(default_factory=list)

    @property
    def counts(self) -> str:
        by: dict[str, int] = {}
        for agent in self.agents:
            by[agent.status] = by.get(agent.status, 0) + 1
        return " · ".join(f"{count} {status}" for status, count in by.items())


@dataclass
class PageState:
    """What the first paint shows."""

    phases: list[PhaseView]
    started_at: float
    ended_at: float | None
    agents: int = 0
    replayed: int = 0
    tokens: int = 0
    cost_usd: float | None = None  # the known costs' sum; None while no child's is known
    unpriced: int = 0  # children that reported tokens but no cost
    failed: int = 0  # children that ended neither completed nor cancelled
    cancelled: int = 0  # children the run's stop cancelled
    last_seq: int = 0
    log: list[tuple[str, str]] = field(default_factory=list)  # (+elapsed, message)
    now: float = field(default_factory=time.time)

    @property
    def cost_text(self) -> str:
        """The cost as the page shows it (``—`` while none is known)."""
        from .._prices import cost_text

        return cost_text(self.cost_usd, self.unpriced) or "—"


def default_model(provider: Mapping[str, Any] | None) -> str | None:
    """The model a recorded provider answers with when a call names none (its default
    route's, for a routing provider)."""
    if not isinstance(provider, Mapping):
        return None
    routes = provider.get("routes")
    if isinstance(routes, Mapping):
        return default_model(routes.get(provider.get("default")))
    model = provider.get("model")
    return model if isinstance(model, str) and model else None


def _tokens(usage: Any) -> int | None:
    if not isinstance(usage, Mapping):
        return None
    return int(usage.get("input_tokens") or 0) + int(usage.get("output_tokens") or 0)


def page_state(record: RunRecord, events: Iterable[StoredEvent],
               calls: Mapping[int, CallBrief], *, fallback_model: str | None = None,
               now: float | None = None) -> PageState:
    """The first paint of ``record``'s page from its stored events and call records."""
    state = PageState(phases=[], started_at=record.created_at, ended_at=None)
    if now is not None:
        state.now = now
    phases: dict[str, PhaseView] = {}
    agents: dict[int, AgentView] = {}

    def add(agent: AgentView) -> None:
        phase = phases.get(agent.phase)
        if phase is None:
            phase = phases[agent.phase] = PhaseView(agent.phase)
            state.phases.append(phase)
        phase.agents.append(agent)
        agents[agent.seq] = agent

    def model_of(seq: int, asked: Any) -> str | None:
        call = calls.get(seq)
        if call is not None and call.model:
            return call.model
        return asked if isinstance(asked, str) and asked else fallback_model

    for stored in events:
        data, at = stored.data, stored.at
        state.last_seq = stored.seq
        kind = data.get("event")
        if kind == "WorkflowStarted":
            state.started_at = at
        elif kind == "LogEmitted":
            state.log.append(("+" + format_duration(at - state.started_at),
                              str(data.get("message", ""))))
        elif kind in ("AgentStarted", "AgentReplayed"):
            seq = data.get("seq")
            if not isinstance(seq, int) or seq in agents:
                continue
            replayed = kind == "AgentReplayed"
            add(AgentView(seq=seq, label=str(data.get("label", "")),
                          phase=str(data.get("phase") or NO_PHASE),
                          status="replayed" if replayed else "running", start=at,
                          end=at if replayed else None, model=model_of(seq, data.get("model")),
                          replayed=replayed))
            if replayed:
                state.replayed += 1
            else:
                state.agents += 1
        elif kind == "AgentEnded":
            agent = agents.get(data.get("seq"))  # type: ignore[arg-type]  # a missing seq finds nothing
            if agent is None:
                continue
            agent.status = str(data.get("outcome", "")) or "completed"
            if agent.status == "cancelled":
                state.cancelled += 1
            elif agent.status != "completed":
                state.failed += 1
            agent.end = at
            agent.tokens = _tokens(data.get("usage"))
            state.tokens += agent.tokens or 0
            usage = data.get("usage")
            child_cost = usage.get("cost_usd") if isinstance(usage, Mapping) else None
            if isinstance(child_cost, int | float) and not isinstance(child_cost, bool):
                state.cost_usd = (state.cost_usd or 0.0) + child_cost
            elif agent.tokens:
                state.unpriced += 1
            error = data.get("error")
            if error is None and agent.status != "completed":
                call = calls.get(agent.seq)
                error = None if call is None else call.failure
            agent.reason = reason_text(error) if agent.status != "completed" else ""
        elif kind == "WorkflowEnded":
            state.ended_at = at
    if record.status != "running":
        end = state.ended_at or record.ended_at or state.now
        for agent in agents.values():
            if agent.status == "running":
                agent.status, agent.end = "interrupted", end
    return state


async def first_paint(store: SQLiteRunStore, record: RunRecord) -> dict[str, Any]:
    """The run page's template values for its first paint: ``state`` (a :class:`PageState`)
    and ``default_model`` (the recorded provider's, for rows the script adds later)."""
    events = await store.events(record.id)
    calls = {call.seq: call for call in await store.call_briefs(record.id)}
    model = default_model(await store.provider(record.id))
    return {"state": page_state(record, events, calls, fallback_model=model),
            "default_model": model or ""}

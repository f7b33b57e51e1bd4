"""The event contract of SPEC §3, checked for one run: the one checker every suite uses.

It needs no pytest: a violation raises :class:`EventContractError` (an ``AssertionError``, so a
test framework reports it as a failed assertion) whose text names the rule and shows the run's
event kinds in order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import TypeAdapter

from .._events import (
    AgentEnded,
    AgentStarted,
    WorkflowEnded,
    WorkflowEvent,
    WorkflowStarted,
)
from .._result import WorkflowResult
from .._run import WorkflowRun

__all__ = ["EventContractError", "check_run_events", "events_from_records"]

_EVENT_TYPES: dict[str, Any] = {
    cls.__name__: cls for cls in WorkflowEvent.__args__  # a union's members
}
_RECORD = TypeAdapter(dict[str, Any])


class EventContractError(AssertionError):
    """A run's events break the event contract; the text says which rule and how."""


def _require(condition: bool, rule: str, kinds: list[str]) -> None:
    if not condition:
        raise EventContractError(f"{rule} (the run's events: {', '.join(kinds) or 'none'})")


def check_run_events(events: Iterable[WorkflowEvent], run: WorkflowRun | str,
                     result: WorkflowResult | None = None) -> None:
    """Check the event contract for one run, given events an engine emitted (other runs'
    events may be mixed in; only ``run``'s are checked).

    Promises, for the run's events in order: exactly one ``WorkflowStarted``, first; exactly one
    ``WorkflowEnded``, last, carrying no value; every ``AgentStarted`` has a unique positive
    ``seq`` and exactly one later ``AgentEnded`` with the same seq, label and phase, and no
    ``AgentEnded`` comes without one. With ``run`` a :class:`WorkflowRun`, every event names its
    meta; with ``result``, the end mirrors its stop reason, error and ``agents_started``,
    which equals the number of ``AgentStarted`` events.

    Raises :class:`EventContractError` on the first rule broken; never mutates ``events``.
    """
    run_id = run if isinstance(run, str) else run.id
    mine = [event for event in events if event.run.id == run_id]
    kinds = [type(event).__name__ for event in mine]
    _require(bool(mine) and isinstance(mine[0], WorkflowStarted),
             "WorkflowStarted must come first", kinds)
    _require(sum(isinstance(event, WorkflowStarted) for event in mine) == 1,
             "WorkflowStarted must fire exactly once", kinds)
    ends = [event for event in mine if isinstance(event, WorkflowEnded)]
    _require(len(ends) == 1, "WorkflowEnded must fire exactly once", kinds)
    end = ends[0]
    _require(mine[-1] is end, "WorkflowEnded must be the run's last event", kinds)
    _require("value" not in type(end).model_fields, "WorkflowEnded carries no value", kinds)
    if not isinstance(run, str):
        for event in mine:
            _require(event.run.meta == run.meta,
                     f"every event names the run's meta, not so: {event!r}", kinds)
    open_agents: dict[int, AgentStarted] = {}
    seen: set[int] = set()
    for event in mine:
        if isinstance(event, AgentStarted):
            _require(event.seq >= 1 and event.seq not in seen,
                     f"AgentStarted with a repeated or bad seq: {event!r}", kinds)
            seen.add(event.seq)
            open_agents[event.seq] = event
        elif isinstance(event, AgentEnded):
            start = open_agents.pop(event.seq, None)
            _require(start is not None, f"AgentEnded without an open AgentStarted: {event!r}",
                     kinds)
            assert start is not None
            _require((event.label, event.phase) == (start.label, start.phase),
                     f"AgentEnded differs from its start: {start!r} / {event!r}", kinds)
    _require(not open_agents, f"AgentStarted never ended: seq {sorted(open_agents)}", kinds)
    if result is not None:
        _require((end.stop_reason, end.error, end.agents_started)
                 == (result.stop_reason, result.error, result.agents_started),
                 f"WorkflowEnded {end!r} does not mirror the result {result!r}", kinds)
        _require(result.agents_started == len(seen),
                 f"agents_started={result.agents_started} but {len(seen)} AgentStarted events",
                 kinds)


def events_from_records(records: Iterable[Mapping[str, Any]]) -> list[WorkflowEvent]:
    """Events rebuilt from their JSON records (``{"event": <class name>, "run": {...}, ...}``,
    as ``dsh-workflow run --events FILE`` writes them), for :func:`check_run_events`.

    Raises ``ValueError`` for a record of no known event kind or with invalid fields."""
    events: list[WorkflowEvent] = []
    for record in records:
        fields = dict(_RECORD.validate_python(record))
        kind = _EVENT_TYPES.get(str(fields.pop("event", "")))
        if kind is None:
            raise ValueError(f"not an event record: {record!r}")
        events.append(kind.model_validate(fields))
    return events

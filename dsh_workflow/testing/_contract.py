"""The event contract of docs/embedding.md, checked for one run: the one checker every suite uses.

It needs no pytest: a violation raises :class:`EventContractError` (an ``AssertionError``, so a
test framework reports it as a failed assertion) whose text names the rule and shows the run's
event kinds in order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NoReturn

from pydantic import TypeAdapter

from .._events import (
    AgentEnded,
    AgentRetried,
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


def _fail(rule: str, mine: list[WorkflowEvent]) -> NoReturn:
    kinds = ", ".join(type(event).__name__ for event in mine) or "none"
    raise EventContractError(f"{rule} (the run's events: {kinds})")


def check_run_events(events: Iterable[WorkflowEvent], run: WorkflowRun | str,
                     result: WorkflowResult | None = None) -> None:
    """Check the event contract for one run, given events an engine emitted (other runs'
    events may be mixed in; only ``run``'s are checked).

    Promises, for the run's events in order: exactly one ``WorkflowStarted``, first; exactly one
    ``WorkflowEnded``, last, carrying no value; every ``AgentStarted`` has a unique positive
    ``seq`` and exactly one later ``AgentEnded`` with the same seq, label and phase, and no
    ``AgentEnded`` comes without one; an ``AgentRetried`` comes between its agent's start and
    end. With ``run`` a :class:`WorkflowRun`, every event names its
    meta; with ``result``, the end mirrors its stop reason, error, error code and ``agents_started``,
    which equals the number of ``AgentStarted`` events.

    Raises :class:`EventContractError` on the first rule broken; never mutates ``events``.
    """
    run_id = run if isinstance(run, str) else run.id
    mine = [event for event in events if event.run.id == run_id]
    # Each rule is tested before its message is built: a run may have many thousands of
    # events, and rendering them for a rule that holds would cost more than the check.
    if not mine or not isinstance(mine[0], WorkflowStarted):
        _fail("WorkflowStarted must come first", mine)
    if sum(isinstance(event, WorkflowStarted) for event in mine) != 1:
        _fail("WorkflowStarted must fire exactly once", mine)
    ends = [event for event in mine if isinstance(event, WorkflowEnded)]
    if len(ends) != 1:
        _fail("WorkflowEnded must fire exactly once", mine)
    end = ends[0]
    if mine[-1] is not end:
        _fail("WorkflowEnded must be the run's last event", mine)
    if "value" in type(end).model_fields:
        _fail("WorkflowEnded carries no value", mine)
    if not isinstance(run, str):
        for event in mine:
            if event.run.meta is not run.meta and event.run.meta != run.meta:
                _fail(f"every event names the run's meta, not so: {event!r}", mine)
    open_agents: dict[int, AgentStarted] = {}
    seen: set[int] = set()
    for event in mine:
        if isinstance(event, AgentStarted):
            if event.seq < 1 or event.seq in seen:
                _fail(f"AgentStarted with a repeated or bad seq: {event!r}", mine)
            seen.add(event.seq)
            open_agents[event.seq] = event
        elif isinstance(event, AgentEnded):
            start = open_agents.pop(event.seq, None)
            if start is None:
                _fail(f"AgentEnded without an open AgentStarted: {event!r}", mine)
            if (event.label, event.phase) != (start.label, start.phase):
                _fail(f"AgentEnded differs from its start: {start!r} / {event!r}", mine)
        elif isinstance(event, AgentRetried) and event.seq not in open_agents:
            _fail(f"AgentRetried outside its agent's start and end: {event!r}", mine)
    if open_agents:
        _fail(f"AgentStarted never ended: seq {sorted(open_agents)}", mine)
    if result is not None:
        if (end.stop_reason, end.error, end.error_code, end.agents_started) \
                != (result.stop_reason, result.error, result.error_code, result.agents_started):
            _fail(f"WorkflowEnded {end!r} does not mirror the result {result!r}", mine)
        if result.agents_started != len(seen):
            _fail(f"agents_started={result.agents_started} but {len(seen)} AgentStarted "
                  "events", mine)


def events_from_records(records: Iterable[Mapping[str, Any]]) -> list[WorkflowEvent]:
    """Events rebuilt from their JSON records (``{"event": <class name>, "run": {...}, ...}``,
    as ``dsh-workflow run --events FILE`` writes them), for :func:`check_run_events`.

    The file writes a run's meta once, on its ``WorkflowStarted`` line, and stamps each line
    with ``ts``: a record whose ``run`` has no ``meta`` gets the meta of that run's
    ``WorkflowStarted`` record read before it, and ``ts`` is dropped. Raises ``ValueError``
    for a record of no known event kind, with invalid fields, or naming a run whose meta no
    earlier record gave."""
    events: list[WorkflowEvent] = []
    metas: dict[str, Any] = {}
    for record in records:
        fields = dict(_RECORD.validate_python(record))
        kind = _EVENT_TYPES.get(str(fields.pop("event", "")))
        if kind is None:
            raise ValueError(f"not an event record: {record!r}")
        fields.pop("ts", None)
        run = fields.get("run")
        if isinstance(run, Mapping):
            run_id = str(run.get("id"))
            if "meta" in run:
                metas.setdefault(run_id, run["meta"])
                if kind is WorkflowStarted:
                    metas[run_id] = run["meta"]
            elif run_id in metas:
                fields["run"] = {**run, "meta": metas[run_id]}
            else:
                raise ValueError(f"the record names run {run_id!r} without its meta, and no "
                                 f"WorkflowStarted record of that run came before: {record!r}")
        events.append(kind.model_validate(fields))
    return events

"""The exported event-contract checker: it accepts every well-formed run and names the rule a
broken one violates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_workflow import (
    AgentEnded,
    AgentStarted,
    LogEmitted,
    PhaseStarted,
    RunInfo,
    WorkflowEnded,
    WorkflowEvent,
    WorkflowMeta,
    WorkflowResult,
    WorkflowStarted,
)
from dsh_workflow._cli.progress import EventLog
from dsh_workflow._errors import ENGINE_FAILED, SCRIPT_FAILED
from dsh_workflow.testing import EventContractError, check_run_events, events_from_records

RUN = RunInfo(id="run-1", meta=WorkflowMeta(name="flow", description="a flow"))
OTHER = RunInfo(id="run-2", meta=WorkflowMeta(name="other", description="another flow"))


@st.composite
def runs(draw: st.DrawFn) -> list[WorkflowEvent]:
    """A well-formed run: starts and ends interleaved with phases and logs, each start ended."""
    count = draw(st.integers(0, 6))
    actions: list[tuple[str, int]] = []
    pending = list(range(1, count + 1))
    open_seqs: list[int] = []
    while pending or open_seqs:
        can_start, can_end = bool(pending), bool(open_seqs)
        choice = draw(st.sampled_from(["start"] * can_start + ["end"] * can_end + ["log"]))
        if choice == "start":
            seq = pending.pop(0)
            open_seqs.append(seq)
            actions.append(("start", seq))
        elif choice == "end":
            seq = open_seqs.pop(draw(st.integers(0, len(open_seqs) - 1)))
            actions.append(("end", seq))
        else:
            actions.append(("log", 0))
    events: list[WorkflowEvent] = [WorkflowStarted(run=RUN), PhaseStarted(run=RUN, title="p")]
    for kind, seq in actions:
        if kind == "start":
            events.append(AgentStarted(run=RUN, seq=seq, label=f"a{seq}", phase="p"))
        elif kind == "end":
            events.append(AgentEnded(run=RUN, seq=seq, label=f"a{seq}", phase="p",
                                     outcome="completed"))
        else:
            events.append(LogEmitted(run=RUN, message="note"))
    events.append(WorkflowEnded(run=RUN, stop_reason="completed", agents_started=count))
    return events


def _result(events: list[WorkflowEvent]) -> WorkflowResult:
    count = sum(isinstance(event, AgentStarted) for event in events)
    return WorkflowResult(value=1, stop_reason="completed", agents_started=count)


@given(runs())
def test_every_well_formed_run_passes(events: list[WorkflowEvent]) -> None:
    check_run_events(events, RUN.id, _result(events))
    # Another run's events mixed in are ignored.
    mixed = [WorkflowStarted(run=OTHER), *events, LogEmitted(run=OTHER, message="x")]
    check_run_events(mixed, RUN.id, _result(events))


@given(runs(), st.data())
def test_a_dropped_agent_end_is_caught(events: list[WorkflowEvent], data: st.DataObject) -> None:
    ends = [i for i, event in enumerate(events) if isinstance(event, AgentEnded)]
    if not ends:
        return
    del events[data.draw(st.sampled_from(ends))]
    with pytest.raises(EventContractError, match="AgentStarted never ended"):
        check_run_events(events, RUN.id)


@given(runs())
def test_a_second_end_is_caught(events: list[WorkflowEvent]) -> None:
    events.append(events[-1])
    with pytest.raises(EventContractError, match="WorkflowEnded must fire exactly once"):
        check_run_events(events, RUN.id)


@pytest.mark.parametrize(("events", "rule"), [
    ([], "WorkflowStarted must come first"),
    ([LogEmitted(run=RUN, message="x"), WorkflowStarted(run=RUN)],
     "WorkflowStarted must come first"),
    ([WorkflowStarted(run=RUN), WorkflowStarted(run=RUN),
      WorkflowEnded(run=RUN, stop_reason="completed", agents_started=0)],
     "WorkflowStarted must fire exactly once"),
    ([WorkflowStarted(run=RUN), WorkflowEnded(run=RUN, stop_reason="completed", agents_started=0),
      LogEmitted(run=RUN, message="late")], "WorkflowEnded must be the run's last event"),
    ([WorkflowStarted(run=RUN),
      AgentEnded(run=RUN, seq=1, label="a", outcome="completed"),
      WorkflowEnded(run=RUN, stop_reason="completed", agents_started=0)],
     "AgentEnded without an open AgentStarted"),
    ([WorkflowStarted(run=RUN), AgentStarted(run=RUN, seq=1, label="a"),
      AgentEnded(run=RUN, seq=1, label="b", outcome="completed"),
      WorkflowEnded(run=RUN, stop_reason="completed", agents_started=1)],
     "AgentEnded differs from its start"),
    ([WorkflowStarted(run=RUN), AgentStarted(run=RUN, seq=0, label="a"),
      AgentEnded(run=RUN, seq=0, label="a", outcome="completed"),
      WorkflowEnded(run=RUN, stop_reason="completed", agents_started=1)],
     "repeated or bad seq"),
])
def test_each_rule_is_named(events: list[WorkflowEvent], rule: str) -> None:
    with pytest.raises(EventContractError, match=rule) as caught:
        check_run_events(events, RUN.id)
    assert isinstance(caught.value, AssertionError)


def test_the_end_must_mirror_the_result() -> None:
    events: list[WorkflowEvent] = [
        WorkflowStarted(run=RUN),
        WorkflowEnded(run=RUN, stop_reason="error", error="boom", error_code=SCRIPT_FAILED,
                      agents_started=0)]
    check_run_events(events, RUN.id, WorkflowResult(stop_reason="error", error="boom"))
    with pytest.raises(EventContractError, match="does not mirror the result"):
        check_run_events(events, RUN.id, WorkflowResult(stop_reason="error", error="boom",
                                                        error_code=ENGINE_FAILED))
    with pytest.raises(EventContractError, match="does not mirror the result"):
        check_run_events(events, RUN.id, WorkflowResult(stop_reason="error", error="other"))


def test_records_written_by_the_event_log_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    log = EventLog(str(path))
    events: list[WorkflowEvent] = [
        WorkflowStarted(run=RUN), AgentStarted(run=RUN, seq=1, label="a", model="m"),
        AgentEnded(run=RUN, seq=1, label="a", outcome="failed"),
        WorkflowEnded(run=RUN, stop_reason="completed", agents_started=1)]
    for event in events:
        log(event)
    log.close()
    records = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert events_from_records(records) == events
    check_run_events(events_from_records(records), RUN.id)
    with pytest.raises(ValueError, match="not an event record"):
        events_from_records([{"event": "Nope", "run": RUN.model_dump(mode="json")}])

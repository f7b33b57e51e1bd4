"""RunTally: the one count behind the CLI panel, a background run's status and MCP progress."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from dsh_workflow import (
    AgentEnded,
    AgentReplayed,
    AgentStarted,
    LogEmitted,
    PhaseStarted,
    RunInfo,
    Usage,
    WorkflowEnded,
    WorkflowMeta,
    WorkflowStarted,
)
from dsh_workflow._cli.history import with_counts
from dsh_workflow._store import RunRecord, StoredEvent
from dsh_workflow._tally import RunTally, StoredCounts, count_stored
from dsh_workflow._tool.background import BackgroundStatus
from dsh_workflow._tool.texts import status_text
from dsh_workflow._ui.summary import run_row
from dsh_workflow.integrations.mcp.notifications import notification_message

RUN = RunInfo(id="r", meta=WorkflowMeta(name="flow", description="d"))


def test_counts_and_what_changes() -> None:
    tally = RunTally(log_lines=2)
    assert tally.record(WorkflowStarted(run=RUN)) is False
    assert tally.name == "flow"
    assert tally.record(PhaseStarted(run=RUN, title="scan")) is True
    for seq in (1, 2, 3):
        assert tally.record(AgentStarted(run=RUN, seq=seq, label=f"a{seq}")) is True
    assert tally.record(AgentReplayed(run=RUN, seq=4, label="old")) is True
    for line in ("one", "two", "three"):
        assert tally.record(LogEmitted(run=RUN, message=line)) is False
    assert list(tally.logs) == ["two", "three"]
    tally.record(AgentEnded(run=RUN, seq=1, label="a1", outcome="completed",
                            usage=Usage(input_tokens=3, output_tokens=4)))
    tally.record(AgentEnded(run=RUN, seq=2, label="a2", outcome="timeout"))
    assert tally.running == {3: "a3"}
    assert (tally.started, tally.replayed, tally.finished, tally.unsuccessful, tally.tokens) \
        == (3, 1, 2, 1, 7)
    status = BackgroundStatus(run_id="r", name="flow", tally=tally).as_data()
    assert (status["state"], status["agents_running"], status["agents_done"],
            status["agents_failed"], status["agents_replayed"]) == ("running", 1, 1, 1, 1)
    assert notification_message(tally) == "phase: scan; 3/4 agents done (1 failed)"
    tally.record(AgentEnded(run=RUN, seq=3, label="a3", outcome="cancelled"))
    tally.record(WorkflowEnded(run=RUN, stop_reason="cancelled", error="workflow cancelled",
                               agents_started=3, usage=Usage(input_tokens=10, output_tokens=2)))
    assert tally.tokens == 12 and tally.elapsed() >= 0
    assert BackgroundStatus(run_id="r", name="flow", tally=tally).as_data()["state"] == "cancelled"
    assert notification_message(tally).endswith("; workflow cancelled")
    # A cancelled child is counted apart from the failed ones (SPEC §23).
    assert (tally.failed, tally.cancelled, tally.unsuccessful) == (1, 1, 2)
    assert "4/4 agents done (1 failed, 1 cancelled)" in notification_message(tally)
    status = BackgroundStatus(run_id="r", name="flow", tally=tally).as_data()
    assert (status["agents_failed"], status["agents_cancelled"]) == (1, 1)
    assert "1 failed, 1 cancelled" in status_text(status)


# ---- stored events: one counting for the CLI and the viewer -------------------------------------

_STORED: list[dict[str, Any]] = [{"event": "WorkflowStarted"}, {"event": "AgentReplayed", "seq": 1, "label": "a"},
           {"event": "AgentStarted", "seq": 2, "label": "b"},
           {"event": "AgentStarted", "seq": 3, "label": "c"},
           {"event": "AgentEnded", "seq": 2, "label": "b", "outcome": "completed",
            "usage": {"input_tokens": 3, "output_tokens": 4}},
           {"event": "AgentEnded", "seq": 3, "label": "c", "outcome": "cancelled", "usage": None}]


def _stored(data: list[dict[str, Any]]) -> list[StoredEvent]:
    return [StoredEvent(run_id="r", seq=i, at=float(i), data=d) for i, d in enumerate(data, 1)]


def test_stored_events_are_counted() -> None:
    assert count_stored(_stored(_STORED)) == StoredCounts(
        agents=2, replayed=1, input_tokens=3, output_tokens=4, unpriced=1, cancelled=1)
    timed_out = [*_STORED[:5], {**_STORED[5], "outcome": "timeout"}]
    assert count_stored(_stored(timed_out)) == StoredCounts(
        agents=2, replayed=1, input_tokens=3, output_tokens=4, unpriced=1, failed=1)
    priced = [*_STORED[:4], {"event": "AgentEnded", "seq": 3, "label": "c", "outcome": "completed",
                             "usage": {"input_tokens": 1, "output_tokens": 1, "cost_usd": 0.25}}]
    counts = count_stored(_stored(priced))
    assert counts == StoredCounts(agents=2, replayed=1, input_tokens=1, output_tokens=1,
                                  cost_usd=0.25)
    assert counts.tokens == 2


_ANYTHING = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8)
_EVENT = st.fixed_dictionaries(
    {"event": st.sampled_from(["AgentStarted", "AgentReplayed", "AgentEnded", "LogEmitted", "X"])},
    optional={"outcome": st.sampled_from(["completed", "failed", "cancelled", "timeout"]) | _ANYTHING,
              "usage": st.fixed_dictionaries({}, optional={
                  "input_tokens": st.integers(0, 10**6) | _ANYTHING,
                  "output_tokens": st.integers(0, 10**6) | _ANYTHING,
                  "cost_usd": st.floats(0, 10, allow_nan=False) | _ANYTHING}) | _ANYTHING})


@given(st.lists(_EVENT, max_size=20), st.integers(0, 20))
def test_stored_events_counted_in_pages_count_as_a_whole(data: list[dict[str, Any]],
                                                         cut: int) -> None:
    """The viewer counts a running run a page at a time; the CLI counts it at once. Whatever a
    foreign writer stored, both come to the same counts, and counting never raises."""
    events = _stored(data)
    whole = count_stored(events)
    paged = count_stored(events[cut:], count_stored(events[:cut]))
    assert paged.agents == whole.agents and paged.tokens == whole.tokens
    assert (paged.failed, paged.cancelled, paged.unpriced) == (whole.failed, whole.cancelled,
                                                               whole.unpriced)
    assert (paged.cost_usd is None) == (whole.cost_usd is None)
    assert whole.failed + whole.cancelled <= sum(e["event"] == "AgentEnded" for e in data)


def test_the_cli_and_the_viewer_show_the_same_counts_of_a_running_run() -> None:
    """``runs``/``show`` and the viewer's run list read the one counting of stored events."""
    running = RunRecord(id="r", meta={"name": "n"}, script="", created_at=1.0, status="running")
    timed_out = [*_STORED[:5], {**_STORED[5], "outcome": "timeout"}]
    counts = count_stored(_stored(timed_out))
    cli = with_counts(running, counts)
    row = run_row(running, now=2.0, so_far=counts)
    assert (cli.agents, cli.replayed, cli.agents_failed, cli.agents_cancelled,
            cli.usage.total_tokens) == (row.agents, row.replayed, row.failed, row.cancelled,
                                        row.tokens) == (2, 1, 1, 0, 7)

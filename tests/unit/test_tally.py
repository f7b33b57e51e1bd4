"""RunTally: the one count behind the CLI panel, a background run's status and MCP progress."""

from __future__ import annotations

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
from dsh_workflow._tally import RunTally
from dsh_workflow._tool.background import BackgroundStatus
from dsh_workflow._tool.texts import status_text
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

"""How the command line words a run's end (SPEC §23): the final line's mark, the counts of
failed and cancelled children, and a cancelled child's reason without its kind said twice."""

from __future__ import annotations

from typing import Any

import pytest

from dsh_workflow import RunInfo, Usage, WorkflowEnded
from dsh_workflow._cli.output import result_document
from dsh_workflow._cli.progress import final_mark, kind_reason, summary_text, warning_text
from dsh_workflow._meta import WorkflowMeta
from dsh_workflow._result import WorkflowResult

RUN = RunInfo(id="r", meta=WorkflowMeta(name="w", description="d"))


def _ended(stop_reason: str, failed: int = 0, cancelled: int = 0) -> WorkflowEnded:
    error = None if stop_reason == "completed" else "x"
    return WorkflowEnded(run=RUN, stop_reason=stop_reason, error=error,
                         agents_started=3, usage=Usage(), agents_failed=failed,
                         agents_cancelled=cancelled)


@pytest.mark.parametrize(("ended", "mark"), [
    (_ended("completed"), ("green", "✔")),
    (_ended("completed", failed=3), ("yellow", "⚠")),
    (_ended("completed", cancelled=1), ("yellow", "⚠")),
    (_ended("cancelled", cancelled=2), ("yellow", "■")),
    (_ended("error", failed=1), ("red", "✖")),
    (None, ("red", "✖")),
])
def test_a_green_check_only_when_every_child_completed(ended: WorkflowEnded | None,
                                                       mark: tuple[str, str]) -> None:
    assert final_mark(ended) == mark


def test_the_summary_counts_failed_and_cancelled_apart() -> None:
    assert summary_text("completed", 1.2, 4, 0, "9 tokens", 2, 1) == \
        "completed in 1.2s, 4 agents, 2 failed, 1 cancelled, 9 tokens"
    assert summary_text("completed", 1.2, 4, 0, "9 tokens") == "completed in 1.2s, 4 agents, 9 tokens"


def test_a_reason_that_starts_with_its_kind_is_not_prefixed_again() -> None:
    assert kind_reason("cancelled", "cancelled from the viewer") == "cancelled from the viewer"
    assert kind_reason("cancelled", "cancelled: the run ended with AGENT_FAILED in agent 3") == \
        "cancelled: the run ended with AGENT_FAILED in agent 3"
    assert kind_reason("timeout", "the child ran too long") == "timeout: the child ran too long"
    assert kind_reason("timeout", "") == "timeout"


def _failure(kind: str, message: str) -> dict[str, Any]:
    return {"kind": kind, "message": message, "details": []}


def test_the_warning_counts_cancelled_children_apart() -> None:
    both = warning_text([_failure("provider", "no"), _failure("cancelled", "cancelled by the "
                                                                            "caller")], 5)
    assert both == ("warning: 1 of 5 agents failed, 1 cancelled — 1 provider: no; "
                    "1 cancelled by the caller")
    only = warning_text([_failure("cancelled", "cancelled from the viewer")] * 2, 2)
    assert only == "warning: 2 of 2 agents cancelled — 2 cancelled from the viewer"


def test_run_json_has_every_key_of_the_result_at_the_top_level() -> None:
    result = WorkflowResult(stop_reason="completed", value=[1], agents_started=3,
                            agents_failed=1, agents_cancelled=1, agents_unpriced=1,
                            usage=Usage(input_tokens=3, output_tokens=4))
    failures = [{"seq": 2, "label": "b", "kind": "provider", "cause": "auth", "message": "no"}]
    document = result_document(result, "r", None, failures)
    assert document == {
        "value": [1], "stop_reason": "completed", "error": None, "error_code": None,
        "agents_started": 3, "agents_failed": 1, "agents_cancelled": 1, "agents_replayed": 0,
        "agents_unpriced": 1, "warnings": [], "failures": failures, "run_id": "r",
        "pending": [], "waiting_reason": None, "resume_after": None,
        "usage": {"input_tokens": 3, "output_tokens": 4, "cost_usd": None}}

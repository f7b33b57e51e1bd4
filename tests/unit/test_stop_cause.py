"""The stop cause's precedence: one value and one rule, checked against the rule it replaced.

A run used to keep five "why it ended" fields (a cancel reason, a timed-out flag, a fault text,
the runtime's outcome, the result) with their own guards; :func:`prevails` replaces them. For any
sequence of events, the result decided from the one cause must equal the result the fields
decided.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from dsh_workflow import EngineConfig, WorkflowResult
from dsh_workflow._engines.host.outcome import (
    ScriptText,
    cancel_message,
    final_result,
    outcome_code,
)
from dsh_workflow._engines.host.stop import (
    Cancelled,
    Fault,
    RuntimeEnded,
    StopCause,
    TimedOut,
    prevails,
)
from dsh_workflow._engines.script.wire import failed
from dsh_workflow._errors import ENGINE_FAILED
from dsh_workflow._meta import WorkflowMeta

CONFIG = EngineConfig(run_timeout_s=5)
TEXT = ScriptText(WorkflowMeta(name="w", description="d"), 0, 0)

_outcomes = st.one_of(
    st.none(),
    st.builds(lambda v: {"ok": True, "value": v}, st.integers()),
    st.builds(lambda e: failed(e), st.text(min_size=1, max_size=5)),
)
_events = st.one_of(
    st.tuples(st.just("cancel"), st.sampled_from(["a", "b", "workflow disposed"])),
    st.tuples(st.just("timeout"), st.none()),
    st.tuples(st.just("fault"), st.sampled_from(["store", "refused"])),
    st.tuples(st.just("violation"), st.sampled_from(["malformed", "engine bug"])),
    st.tuples(st.just("end"), _outcomes),
    st.tuples(st.just("settle"), st.none()),
)


@dataclass
class _Fields:
    """The flag set the stop cause replaced, with its guards as they were written."""

    cancel_reason: str | None = None
    timed_out: bool = False
    fault: str | None = None
    outcome: Any = None
    settled: bool = False
    reply_at_settle: str | None = None

    def apply(self, kind: str, arg: Any) -> None:
        if kind == "cancel":
            if self.settled or self.cancel_reason is not None or self.timed_out:
                return
            self.cancel_reason = arg
        elif kind == "timeout":
            if not self.settled and self.cancel_reason is None:
                self.timed_out = True
        elif kind == "fault":
            if self.fault is None:
                self.fault = arg
        elif kind == "violation":
            self.fault = arg
        elif kind == "end":
            self.outcome = arg
        else:
            if not self.settled:
                self.reply_at_settle = self.reply_text()
            self.settled = True

    def reply_text(self) -> str:
        """What a child ended by the stop is told (SPEC §23): the cancel's reason, which names
        its origin; the timeout; else the code that ended the run — never internal words. Once
        settled, what it was then (nothing changes a settled run's cause)."""
        if self.reply_at_settle is not None:
            return self.reply_at_settle
        reason = self.cancel_reason
        if reason is not None:
            return reason if reason.startswith("cancelled") else f"cancelled: {reason}"
        if self.timed_out:
            return cancel_message(TimedOut(), CONFIG)
        if self.fault is not None:
            return f"cancelled: the run ended with {ENGINE_FAILED.value}"
        if self.outcome is None:
            return "cancelled: the run stopped"
        if self.outcome.get("ok") is True:
            return "cancelled: the script returned before this agent ended"
        return f"cancelled: the run ended with {outcome_code(self.outcome).value}"

    def cause(self) -> StopCause | None:
        """The cause the fields stood for, read in their old order."""
        if self.cancel_reason is not None:
            return Cancelled(self.cancel_reason)
        if self.timed_out:
            return TimedOut()
        if self.fault is not None:
            return Fault(self.fault)
        return RuntimeEnded(self.outcome)


def _cause_of(kind: str, arg: Any) -> StopCause:
    if kind == "cancel":
        return Cancelled(arg)
    if kind == "timeout":
        return TimedOut()
    if kind == "fault":
        return Fault(arg)
    if kind == "violation":
        return Fault(arg, overrides=True)
    return RuntimeEnded(arg)


def _result(cause: StopCause | None) -> WorkflowResult:
    return final_result(cause, started=0, replayed=0, usage=None, text=TEXT, config=CONFIG)


@given(st.lists(_events, max_size=8))
def test_one_cause_decides_as_the_flag_set_did(events: list[tuple[str, Any]]) -> None:
    fields = _Fields()
    cause: StopCause | None = None
    settled_with: WorkflowResult | None = None
    old_settled_with: WorkflowResult | None = None
    for kind, arg in events:
        if kind == "settle":
            settled_with = settled_with or _result(cause)
            old_settled_with = old_settled_with or _result(fields.cause())
        elif settled_with is None and prevails(_cause_of(kind, arg), cause):
            cause = _cause_of(kind, arg)
        fields.apply(kind, arg)
        # what a child ended by the stop is told, at every step
        assert cancel_message(cause, CONFIG) == fields.reply_text()
    assert (settled_with or _result(cause)) == (old_settled_with or _result(fields.cause()))


@given(st.lists(_events, min_size=1, max_size=8))
def test_the_first_cancel_or_timeout_stands(events: list[tuple[str, Any]]) -> None:
    cause: StopCause | None = None
    for kind, arg in events:
        if kind != "settle" and prevails(_cause_of(kind, arg), cause):
            cause = _cause_of(kind, arg)
    first = next((_cause_of(k, a) for k, a in events if k in ("cancel", "timeout")), None)
    if first is not None:
        assert cause == first


def test_a_fault_outranks_the_runtimes_end_and_a_violation_an_earlier_fault() -> None:
    ended = RuntimeEnded({"ok": True, "value": 1})
    assert prevails(Fault("x"), ended) and not prevails(ended, Fault("x"))
    assert not prevails(Fault("later"), Fault("first"))
    assert prevails(Fault("violation", overrides=True), Fault("first"))
    assert prevails(Cancelled("c"), Fault("x")) and not prevails(Fault("x"), Cancelled("c"))
    assert prevails(RuntimeEnded(None), ended)  # the latest end report stands

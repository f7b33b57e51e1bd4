"""The run's open ``agent()`` calls and their answers, in one place.

Three pieces of a run meet at its open calls: the hook server (:mod:`.serving`) opens them, the
scheduler (:mod:`.scheduler`) runs them and the journal writer (:mod:`.journal_writer`) commits a
durable run's answers before the script may see them. None of them holds the table or calls
another to end a call: each uses the run's :class:`CallLedger`, which owns the open calls, the
answers awaiting their commit and the one place a call ends.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

import anyio

from ..._config import EngineConfig
from ..._errors import WorkflowErrorCode
from ..._events import AgentEnded, AgentOutcome, EventHub, RunInfo
from ..._failure import AgentFailure
from ..._store import JournalEntry
from ..._subagent import SubagentRequest, Usage
from ..script.wire import ScriptRuntime, SettleEntry, refusal, spent
from .budget import Spend

__all__ = ["CallLedger", "ChildCall"]

_AGENT_FAILED = WorkflowErrorCode.AGENT_FAILED.value


@dataclass(eq=False)
class ChildCall:
    """One accepted ``agent()`` call."""

    call_id: int
    seq: int
    request: SubagentRequest
    started: bool = False
    ended: bool = False
    outcome: AgentOutcome | None = None
    reply: SettleEntry | None = field(default=None, repr=False)
    usage: Usage | None = None  # what the provider reported, once it returned (every attempt)
    last_usage: Usage | None = None  # the last attempt's (the earlier ones counted as retried)
    attempts: int = 1  # provider calls made for it (retries included)
    key: str | None = None  # the journal key (runs with a store)
    replay: JournalEntry | None = None  # the earlier run's answer, for a replayed call
    spent: bool = False  # its usage raised the run's tokens spent (the script is told)
    failure: AgentFailure | None = None  # why it did not complete (AgentEnded.error)
    throw: bool = False  # failure: "throw": a failed child rejects with an AgentFailure
    fatal: str | None = None  # the run's end when its provider is unavailable
    fatal_code: WorkflowErrorCode = WorkflowErrorCode.AGENT_FAILED  # that end's code
    uncounted: str | None = None  # why the dollar budget cannot count its usage
    #: A provider's usage limit parks the run (``on_limit="park"``): when it resets, if said.
    limit: tuple[datetime | None] | None = None
    scope: anyio.CancelScope | None = field(default=None, repr=False)  # while its child runs


class CallLedger:
    """A run's open calls: each opened once (:meth:`open`), ended once (:meth:`end`).

    Ending a call emits its paired end event, counts its failure and settles its reply with the
    runtime (:attr:`runtime`). In a run with a store (``journaled``), a completed or replayed
    call's answer is first held (:meth:`hold`) until the journal writer, which takes what is
    held with :meth:`held`, has committed it. ``cancel_message()`` is the text a call ended by
    the run's stop throws; ``fail_run(text, seq)`` ends the run with fatal ``AGENT_FAILED`` (the
    failure ceiling). Once :meth:`close` ran, nothing more is sent to the runtime.
    """

    def __init__(self, *, info: RunInfo, config: EngineConfig, events: EventHub, spend: Spend,
                 cancel_message: Callable[[], str], fail_run: Callable[[str, int], None],
                 journaled: bool = False) -> None:
        self._info = info
        self._config = config
        self._events = events
        self._spend = spend
        self._cancel_message = cancel_message
        self._fail_run = fail_run
        #: Where replies go (set once the run has its runtime).
        self.runtime: ScriptRuntime | None = None
        #: Answers wait for the journal's commit before the script sees them.
        self.journaled = journaled
        self.closed = False
        self.failed = 0  # started children that failed (the result's agents_failed)
        self.cancelled = 0  # started children the run's stop cancelled (agents_cancelled)
        self.reasons: Counter[str] = Counter()  # failures by "kind: message" (their summary)
        self._failed_open = 0  # children that failed while the run was still open
        self.live: set[ChildCall] = set()  # accepted calls not yet ended
        self.children_gone: anyio.Event | None = None  # set once live empties, if awaited
        #: Cancel scopes of the tasks that answer calls (workers, the journal writer); all
        #: cancelled by close().
        self.scopes: set[anyio.CancelScope] = set()
        # Answers awaiting the journal's commit (a list: every run has a ledger, few a store).
        self._held: list[ChildCall] = []
        self._wake = anyio.Event() if journaled else None

    def open(self, call: ChildCall) -> None:
        """Count ``call`` (accepted) as open until :meth:`end`."""
        self.live.add(call)

    # ---- answers awaiting their commit ------------------------------------------------------

    def hold(self, call: ChildCall) -> None:
        """Keep ``call`` (its reply set, or its ``replay`` found) for the journal's next
        commit; the writer ends it once committed."""
        assert self._wake is not None
        self._held.append(call)
        self._wake.set()

    async def held(self) -> list[ChildCall]:
        """Wait until calls are held, then take them all, in the order they were held (the
        list may be empty: a wake-up with nothing left)."""
        assert self._wake is not None
        await self._wake.wait()
        self._wake = anyio.Event()
        batch, self._held = self._held, []
        return batch

    # ---- ending calls -----------------------------------------------------------------------

    def cancelled_reply(self, call: ChildCall) -> SettleEntry:
        """The reply of a call the run's stop ended."""
        return refusal(call.call_id, WorkflowErrorCode.CANCELLED.value, self._cancel_message())

    def end(self, call: ChildCall) -> None:
        """Close a call exactly once: its paired end event, its settlement, its place in
        :attr:`live`. A call ended without a reply is ``cancelled``; its reply (the cancel
        text) is written only while the runtime can still be sent one."""
        if call not in self.live:
            return
        self.live.discard(call)
        closed = self.closed
        if call.reply is None:
            call.outcome = "cancelled"
            if not closed:  # once closed no reply reaches the runtime: none is written
                call.reply = self.cancelled_reply(call)
        if call.started and not call.ended:
            call.ended = True
            outcome = call.outcome or "cancelled"
            failure = None
            if outcome != "completed":
                # A child the script cancelled (first()'s losers) did not fail: the failure
                # ceiling does not count it.
                failure = self._failed(call, outcome,
                                       counted=not closed and outcome != "cancelled")
            self._events.emit(AgentEnded(
                run=self._info, seq=call.seq, label=call.request.label, phase=call.request.phase,
                outcome=outcome, usage=call.usage, error=failure))
        runtime = self.runtime
        if runtime is not None and not closed and call.reply is not None:
            if call.spent:
                # The script's budget.spent() is current before it sees this child's value.
                runtime.settle(spent(self._spend.total, self._spend.cost_usd))
            runtime.settle(call.reply)
        if not self.live and self.children_gone is not None:
            self.children_gone.set()
        self._check_ceiling(call.seq)

    def _failed(self, call: ChildCall, outcome: AgentOutcome, *, counted: bool) -> AgentFailure:
        """Count a started child that did not complete (a cancelled one apart from the failed
        ones); returns its reason. ``counted``: it failed while the run was open (what the
        failure ceiling counts; a cancelled child never counts there)."""
        failure = call.failure
        if failure is None or (outcome == "cancelled" and failure.kind != "cancelled"):
            if outcome == "timeout":
                failure = AgentFailure.of("timeout", "the child ran past agent_timeout_s")
            elif outcome == "cancelled":
                failure = AgentFailure.of("cancelled", self._cancel_message())
            else:
                failure = AgentFailure.of("provider", "the child failed")
            call.failure = failure
        if outcome == "cancelled":
            self.cancelled += 1
            return failure
        self.failed += 1
        self.reasons[failure.summary()] += 1
        if counted:
            self._failed_open += 1
        return failure

    def _check_ceiling(self, seq: int) -> None:
        """The failure ceiling (``max_failed_agents``): once more children failed while the
        run was open, the run ends with fatal ``AGENT_FAILED`` (in agent ``seq``, the one that
        just ended)."""
        ceiling = self._config.max_failed_agents
        if ceiling is None or self.closed or self._failed_open <= ceiling:
            return
        reason, times = self.reasons.most_common(1)[0]
        self._fail_run(
            f"{_AGENT_FAILED}: {self._failed_open} agents failed, more than the failure ceiling "
            f"allows (max_failed_agents={ceiling}); the most frequent reason ({times} of them): "
            f"{reason}", seq)

    def close(self) -> None:
        """The run stops: nothing reaches the runtime any more, every answer not yet committed
        ends unanswered, and every task answering calls is cancelled (the scheduler ends its
        queued calls itself)."""
        self.closed = True
        while self._held:
            held, self._held = self._held, []
            for call in held:
                self.end(call)
        for scope in list(self.scopes):
            scope.cancel()

    def abandon(self) -> None:
        """For calls that would not end within the grace: synthesize the end event of each
        started, unended one, in call order (nothing else happens to them)."""
        for call in sorted(self.live, key=lambda c: c.seq):
            if call.started and not call.ended:
                call.ended = True
                failure = self._failed(call, "cancelled", counted=False)
                self._events.emit(AgentEnded(run=self._info, seq=call.seq,
                                             label=call.request.label, phase=call.request.phase,
                                             outcome="cancelled", error=failure))

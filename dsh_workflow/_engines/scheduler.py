"""The child scheduler: where an accepted ``agent()`` call is granted its slot and run.

Accepted calls wait in a FIFO for one of ``max_concurrent_agents`` slots; :meth:`admit` grants
slots synchronously and in call order, and worker tasks (reused from call to call, parked in
between) take admitted calls from a FIFO and enter the provider before they next yield, so
providers are entered in call order whatever order the scheduler runs tasks in. Each child runs
under the worker's cancel scope and ``agent_timeout_s``; its reply goes back to the script once
(:meth:`end_call`), after the journal has committed it in a run with a store.
"""

from __future__ import annotations

import json
import logging
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import TaskGroup

from .._config import EngineConfig
from .._depth import deeper_than
from .._errors import WorkflowErrorCode
from .._events import AgentEnded, AgentOutcome, AgentStarted, EventHub, RunInfo
from .._failure import AgentFailure, ProviderUnavailable
from .._schema_limits import SchemaLimits
from .._store import JournalEntry
from .._subagent import SubagentProvider, SubagentRequest, SubagentResult, Usage
from .budget import Spend
from .script.wire import ScriptRuntime, SettleEntry, agent_failure, answer, refusal, spent

if TYPE_CHECKING:
    from .journal_writer import JournalWriter

__all__ = ["ChildCall", "ChildScheduler", "structured_problems"]

logger = logging.getLogger("dsh_workflow.engine")

#: Most parked child workers a run keeps for its next calls (never more than its concurrency
#: cap); a worker that finds that many parked exits instead of parking.
_MAX_PARKED_WORKERS = 128

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
    usage: Usage | None = None  # what the provider reported, once it returned
    key: str | None = None  # the journal key (runs with a store)
    replay: JournalEntry | None = None  # the earlier run's answer, for a replayed call
    spent: bool = False  # its usage raised the run's tokens spent (the script is told)
    failure: AgentFailure | None = None  # why it did not complete (AgentEnded.error)
    throw: bool = False  # failure: "throw": a failed child rejects with an AgentFailure
    fatal: str | None = None  # the run's end when its provider is unavailable


def _render(exc: BaseException) -> str:
    """``str(exc)``, or a fixed label when even that fails."""
    try:
        return str(exc)
    except Exception:  # noqa: BLE001 - any failure of str() gets the fixed label
        return "[unrenderable exception]"


def structured_problems(schema: dict[str, Any], value: object,
                        limits: SchemaLimits) -> list[str]:
    """Why a child's structured ``value`` is rejected (``[]``: accepted), each with its JSON
    pointer; for a worker thread. A replayed answer goes through the same check
    (``serving.py``)."""
    from .._schema import value_violations  # jsonschema loads only for runs with schemas

    try:
        json.dumps(value, allow_nan=False)
        return value_violations(schema, value, limits=limits, pointers=True)
    except (TypeError, ValueError, RecursionError):
        return ["/: the structured value is not JSON data"]


class ChildScheduler:
    """A run's children: slots, the FIFO, workers, and each child's one reply.

    ``cancel_message()`` is the text a call ended by the run's stop throws. Once :meth:`close`
    ran, nothing more is admitted, run or sent to the runtime.
    """

    def __init__(self, *, run_id: str, info: RunInfo, config: EngineConfig,
                 provider: SubagentProvider, events: EventHub, task_group: TaskGroup,
                 spend: Spend, limits: SchemaLimits,
                 cancel_message: Callable[[], str],
                 fail_run: Callable[[str], None] = lambda text: None) -> None:
        self._id = run_id
        self._info = info
        self._config = config
        self._provider = provider
        self._events = events
        self._tg = task_group
        self._spend = spend
        self._limits = limits
        self._cancel_message = cancel_message
        self._fail_run = fail_run  # ends the run with fatal AGENT_FAILED (the text given)
        self.runtime: ScriptRuntime | None = None
        self.journal_writer: JournalWriter | None = None
        self.closed = False
        self.started = 0  # children given a slot (the result's agents_started)
        self.failed = 0  # started children that did not complete (the result's agents_failed)
        self.reasons: Counter[str] = Counter()  # failures by "kind: message" (their summary)
        self._failed_open = 0  # children that failed while the run was still open
        self.live: set[ChildCall] = set()  # accepted calls not yet ended (queued or running)
        self.children_gone: anyio.Event | None = None  # set once live empties, if awaited
        self._queue: deque[ChildCall] = deque()  # accepted calls waiting for a slot
        self._ready: deque[ChildCall] = deque()  # calls given a slot, not yet taken by a worker
        self._running = 0  # slots in use: calls ready or being run
        self._parked: list[anyio.Event] = []  # wake-ups of idle workers
        self.scopes: set[anyio.CancelScope] = set()  # cancelled by close()
        self._keep_parked = min(config.max_concurrent_agents, _MAX_PARKED_WORKERS)
        #: Serving from a plain loop callback (no task to spawn from): workers are owed.
        self.deferring = False
        self.owed_workers = 0

    # ---- slots ----------------------------------------------------------------------------

    def offer(self, call: ChildCall) -> None:
        """Take an accepted call: admitted at once while a slot is free, else queued."""
        self.live.add(call)
        if self._running < self._config.max_concurrent_agents:
            self.admit(call)
        else:
            self._queue.append(call)

    def admit(self, call: ChildCall, *, wake: bool = True) -> None:
        """Give ``call`` a concurrency slot and hand it to a worker (the one place a slot is
        granted). ``wake=False``: the calling worker takes it itself."""
        self._running += 1
        call.started = True
        self.started += 1
        spend = self._spend
        if spend.budget is not None:  # a token budget only: dollars do not limit a response
            call.request = call.request.model_copy(
                update={"max_output_tokens": spend.remaining()})
        self._events.emit(AgentStarted(
            run=self._info, seq=call.seq, label=call.request.label, phase=call.request.phase,
            model=call.request.model))
        self._ready.append(call)
        if not wake:
            return
        if self._parked:
            self._parked.pop().set()
        elif self.deferring:
            self.owed_workers += 1
        else:
            self._spawn_worker()

    def spawn_owed(self) -> None:
        """Spawn the workers owed since :attr:`deferring` serving (from a task)."""
        while self.owed_workers and not self.closed:
            self.owed_workers -= 1
            self._spawn_worker()

    def _spawn_worker(self) -> None:
        self._tg.start_soon(self._worker, name=f"dsh-workflow children of {self._id}")

    def refuse_queued(self) -> None:
        """The budget is spent: every call still waiting for a slot throws
        ``BUDGET_EXCEEDED`` instead of starting."""
        while self._queue:
            call = self._queue.popleft()
            call.reply = refusal(call.call_id, WorkflowErrorCode.BUDGET_EXCEEDED.value,
                                 self._spend.refusal_message())
            self.end_call(call)

    # ---- workers --------------------------------------------------------------------------

    async def _worker(self) -> None:
        """Run ready calls one after another, parking in between; ends when closed.

        A worker is reused across calls (spawning a task per call costs more than the call
        itself on a fast provider); its cancel scope is cancelled by :meth:`close`."""
        wake: anyio.Event | None = None
        with anyio.CancelScope() as scope:
            self.scopes.add(scope)
            try:
                while not self.closed:
                    if self._ready:
                        await self._run_call(self._ready.popleft())
                    elif len(self._parked) >= self._keep_parked:
                        return
                    else:
                        wake = anyio.Event()
                        self._parked.append(wake)
                        await wake.wait()
            finally:
                self.scopes.discard(scope)
                if wake is not None and not wake.is_set() and wake in self._parked:
                    self._parked.remove(wake)

    async def _run_call(self, call: ChildCall) -> None:
        journaled = False
        try:
            call.reply, call.outcome = await self._run_child(call)
            self._drop_too_deep(call)
            if call.throw and call.outcome != "completed" and call.reply[1] is True \
                    and call.failure is not None:
                call.reply = agent_failure(call.call_id, call.failure.model_dump(mode="json"))
            call.spent = self._spend.count(call.usage)
            if call.spent and self._spend.exhausted():
                self.refuse_queued()
            writer = self.journal_writer
            if call.outcome == "completed" and writer is not None:
                # Its answer reaches the script once the journal writer has committed it.
                journaled = True
                writer.post(call)
        except Exception:
            logger.exception("dsh-workflow: child %s#%d failed inside the engine", self._id,
                             call.seq)
            call.reply = refusal(call.call_id, _AGENT_FAILED,
                                 "agent() failed inside the workflow engine (a bug; see the "
                                 "host's log)")
            call.outcome = "failed"
            call.failure = AgentFailure.of("provider", "agent() failed inside the workflow "
                                           "engine (a bug; see the host's log)")
        finally:
            self._running -= 1
            if call.fatal is not None and not self.closed:
                self._fail_run(call.fatal)  # before its reply: the script cannot catch it
            if not journaled:
                self.end_call(call)
            ticket = False  # the first call admitted here is this worker's next
            while self._queue and not self.closed \
                    and self._running < self._config.max_concurrent_agents:
                self.admit(self._queue.popleft(), wake=ticket)
                ticket = True

    async def _run_child(self, call: ChildCall) -> tuple[SettleEntry, AgentOutcome]:
        request = call.request
        try:
            timeout = self._config.agent_timeout_s
            if timeout is None:
                result = await self._provider.run(request)
            else:
                with anyio.move_on_after(timeout) as timer:
                    result = await self._provider.run(request)
                if timer.cancelled_caught:
                    call.failure = AgentFailure.of(
                        "timeout", f"the child ran longer than agent_timeout_s={timeout:g} and "
                        "was cancelled")
                    return answer(call.call_id, None), "timeout"
            if isinstance(result, SubagentResult):
                call.usage = result.usage
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as exc:
            if self.closed:
                return self.cancelled_reply(call), "cancelled"
            if isinstance(exc, ProviderUnavailable):
                # Every later child would hit it too: the run ends at once (README, "Truthful
                # outcomes"); the text says all there is, so no traceback is logged.
                logger.info("dsh-workflow: provider unavailable for %s#%d: %s", self._id,
                               call.seq, _render(exc))
                call.failure = AgentFailure.of("provider", _render(exc))
                call.fatal = f"{_AGENT_FAILED}: {call.failure.message}"
                return refusal(call.call_id, _AGENT_FAILED, call.failure.message), "failed"
            logger.warning("dsh-workflow: provider raised for %s#%d", self._id, call.seq,
                           exc_info=True)
            text = f"agent() failed: the subagent provider raised {type(exc).__name__}: " \
                   f"{_render(exc)}"
            call.failure = AgentFailure.of("provider", text)
            # The fatal error the script sees is the reason, redacted and bounded likewise.
            return refusal(call.call_id, _AGENT_FAILED, call.failure.message), "failed"
        # Decided on the loop: no coroutine per child unless a structured value needs checking.
        mapped = self._map_result(call, result)
        if mapped is not None:
            return mapped
        assert isinstance(result, SubagentResult) and call.request.schema is not None
        return await self._validated(call, call.request.schema, result.structured)

    @staticmethod
    def _map_result(call: ChildCall,
                    result: object) -> tuple[SettleEntry, AgentOutcome] | None:
        """The reply and outcome for a provider's result, or None when it is a completed
        result's structured value for a call with a schema (to be validated first)."""
        if not isinstance(result, SubagentResult):
            text = ("agent() failed: the subagent provider returned "
                    f"{type(result).__name__}, not a SubagentResult")
            call.failure = AgentFailure.of("provider", text)
            # The fatal error the script sees is the reason, redacted and bounded likewise.
            return refusal(call.call_id, _AGENT_FAILED, call.failure.message), "failed"
        if result.stop_reason != "completed":
            call.failure = AgentFailure.of("provider", result.error or (
                f"the provider ended the child with stop_reason {result.stop_reason!r} and "
                "gave no error text"))
            return answer(call.call_id, None), "failed"
        if call.request.schema is None:
            return answer(call.call_id, result.text if result.text is not None else ""), \
                "completed"
        if result.structured is None:
            said = "" if not result.text else f"; its text began: {result.text[:200]!r}"
            call.failure = AgentFailure.of(
                "missing", f"the schema call completed without a structured value{said}")
            return answer(call.call_id, None), "failed"
        return None

    async def _validated(self, call: ChildCall, schema: dict[str, Any],
                         value: object) -> tuple[SettleEntry, AgentOutcome]:
        """The reply and outcome for a completed child's structured ``value``, validated on a
        worker thread (bounded by the schema limits; cancellation waits for it and drops it)."""
        problems = await anyio.to_thread.run_sync(structured_problems, schema, value,
                                                  self._limits)
        if problems:
            logger.info("dsh-workflow: %s#%d structured value rejected: %s", self._id,
                        call.seq, "; ".join(problems))
            call.failure = AgentFailure.of("invalid", "; ".join(problems[:5]), problems)
            return answer(call.call_id, None), "failed"
        return answer(call.call_id, value), "completed"

    def _drop_too_deep(self, call: ChildCall) -> None:
        """An answer nested deeper than ``max_value_depth`` becomes a failed child: the script's
        JSON.parse recurses, and the configuration guarantees the stack holds only that deep."""
        assert call.reply is not None
        if call.reply[1] is True and deeper_than(call.reply[2], self._config.max_value_depth):
            logger.info("dsh-workflow: %s#%d answer nested deeper than max_value_depth=%d "
                        "dropped", self._id, call.seq, self._config.max_value_depth)
            call.reply, call.outcome = answer(call.call_id, None), "failed"
            depth = self._config.max_value_depth
            call.failure = AgentFailure.of(
                "invalid", f"/: the answer is nested deeper than max_value_depth={depth}")

    # ---- ending calls ---------------------------------------------------------------------

    def cancelled_reply(self, call: ChildCall) -> SettleEntry:
        """The reply of a call the run's stop ended."""
        return refusal(call.call_id, WorkflowErrorCode.CANCELLED.value, self._cancel_message())

    def end_call(self, call: ChildCall) -> None:
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
                failure = self._failed(call, outcome, counted=not closed)
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
        self._check_ceiling()

    def _failed(self, call: ChildCall, outcome: AgentOutcome, *, counted: bool) -> AgentFailure:
        """Count a started child that did not complete; returns its reason. ``counted``: it
        failed while the run was open (what the failure ceiling counts)."""
        failure = call.failure
        if failure is None or (outcome == "cancelled" and failure.kind != "cancelled"):
            if outcome == "timeout":
                failure = AgentFailure.of("timeout", "the child ran past agent_timeout_s")
            elif outcome == "cancelled":
                failure = AgentFailure.of("cancelled", self._cancel_message())
            else:
                failure = AgentFailure.of("provider", "the child failed")
            call.failure = failure
        self.failed += 1
        self.reasons[failure.summary()] += 1
        if counted:
            self._failed_open += 1
        return failure

    def _check_ceiling(self) -> None:
        """The failure ceiling (``max_failed_agents``): once more children failed while the
        run was open, the run ends with fatal ``AGENT_FAILED``."""
        ceiling = self._config.max_failed_agents
        if ceiling is None or self.closed or self._failed_open <= ceiling:
            return
        reason, times = self.reasons.most_common(1)[0]
        self._fail_run(
            f"{_AGENT_FAILED}: {self._failed_open} agents failed, more than the failure ceiling "
            f"allows (max_failed_agents={ceiling}); the most frequent reason ({times} of them): "
            f"{reason}")

    def close(self) -> None:
        """Stop: end the calls no worker has begun (replays and answers awaiting the journal,
        queued and ready ones) and cancel every worker; nothing reaches the runtime any more."""
        self.closed = True
        if self.journal_writer is not None:
            self.journal_writer.drop()
        while self._queue:
            self.end_call(self._queue.popleft())
        while self._ready:
            self._running -= 1
            self.end_call(self._ready.popleft())
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

"""The child scheduler: where an accepted ``agent()`` call is granted its slot and run.

Accepted calls wait in a FIFO for one of ``max_concurrent_agents`` slots; :meth:`admit` grants
slots synchronously and in call order, and worker tasks (reused from call to call, parked in
between) take admitted calls from a FIFO and enter the provider before they next yield, so
providers are entered in call order whatever order the scheduler runs tasks in. Each child runs
under the worker's cancel scope and ``agent_timeout_s``; its reply goes back to the script once
(:meth:`.ledger.CallLedger.end`), after the journal has committed it in a run with a store.
"""

from __future__ import annotations

import json
import logging
from collections import deque
from collections.abc import Callable
from typing import Any

import anyio
from anyio.abc import TaskGroup

from ..._config import EngineConfig
from ..._depth import deeper_than
from ..._errors import WorkflowErrorCode
from ..._events import AgentOutcome, AgentStarted, EventHub, RunInfo
from ..._failure import AgentFailure, FailureKind, ProviderUnavailable
from ..._schema_limits import SchemaLimits
from ..._subagent import SubagentProvider, SubagentResult
from ..script.wire import SettleEntry, agent_failure, answer, refusal
from .budget import Spend
from .ledger import CallLedger, ChildCall

__all__ = ["ChildScheduler", "structured_problems"]

logger = logging.getLogger("dsh_workflow.engine")

#: Most parked child workers a run keeps for its next calls (never more than its concurrency
#: cap); a worker that finds that many parked exits instead of parking.
_MAX_PARKED_WORKERS = 128

_AGENT_FAILED = WorkflowErrorCode.AGENT_FAILED.value


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
    from ..._schema import value_violations  # jsonschema loads only for runs with schemas

    try:
        json.dumps(value, allow_nan=False)
        return value_violations(schema, value, limits=limits, pointers=True)
    except (TypeError, ValueError, RecursionError):
        return ["/: the structured value is not JSON data"]


class ChildScheduler:
    """A run's children: slots, the FIFO, workers, and each child's one reply.

    Calls are opened and ended in the run's :class:`~.ledger.CallLedger` (``calls``). Once the
    ledger is closed, nothing more is admitted, run or sent to the runtime; :meth:`close` then
    ends the calls still waiting here.
    """

    def __init__(self, *, run_id: str, info: RunInfo, config: EngineConfig,
                 provider: SubagentProvider, events: EventHub, task_group: TaskGroup,
                 spend: Spend, limits: SchemaLimits, calls: CallLedger,
                 fail_run: Callable[[str], None] = lambda text: None) -> None:
        self._id = run_id
        self._info = info
        self._config = config
        self._provider = provider
        self._events = events
        self._tg = task_group
        self._spend = spend
        self._limits = limits
        self._calls = calls
        self._fail_run = fail_run  # ends the run with fatal AGENT_FAILED (the text given)
        self.started = 0  # children given a slot (the result's agents_started)
        self._queue: deque[ChildCall] = deque()  # accepted calls waiting for a slot
        self._ready: deque[ChildCall] = deque()  # calls given a slot, not yet taken by a worker
        self._running = 0  # slots in use: calls ready or being run
        self._parked: list[anyio.Event] = []  # wake-ups of idle workers
        self._keep_parked = min(config.max_concurrent_agents, _MAX_PARKED_WORKERS)
        #: Serving from a plain loop callback (no task to spawn from): workers are owed.
        self.deferring = False
        self.owed_workers = 0

    # ---- slots ----------------------------------------------------------------------------

    def offer(self, call: ChildCall) -> None:
        """Take an accepted call: admitted at once while a slot is free, else queued."""
        self._calls.open(call)
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
        while self.owed_workers and not self._calls.closed:
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
            self._calls.end(call)

    # ---- workers --------------------------------------------------------------------------

    async def _worker(self) -> None:
        """Run ready calls one after another, parking in between; ends when closed.

        A worker is reused across calls (spawning a task per call costs more than the call
        itself on a fast provider); its cancel scope is cancelled when the ledger closes."""
        wake: anyio.Event | None = None
        calls = self._calls
        with anyio.CancelScope() as scope:
            calls.scopes.add(scope)
            try:
                while not calls.closed:
                    if self._ready:
                        await self._run_call(self._ready.popleft())
                    elif len(self._parked) >= self._keep_parked:
                        return
                    else:
                        wake = anyio.Event()
                        self._parked.append(wake)
                        await wake.wait()
            finally:
                calls.scopes.discard(scope)
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
            if call.outcome == "completed" and self._calls.journaled:
                # Its answer reaches the script once the journal writer has committed it.
                journaled = True
                self._calls.hold(call)
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
            if call.fatal is not None and not self._calls.closed:
                self._fail_run(call.fatal)  # before its reply: the script cannot catch it
            if not journaled:
                self._calls.end(call)
            ticket = False  # the first call admitted here is this worker's next
            while self._queue and not self._calls.closed \
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
            if self._calls.closed:
                return self._calls.cancelled_reply(call), "cancelled"
            if isinstance(exc, ProviderUnavailable):
                # Every later child would hit it too: the run ends at once (docs/scripts.md,
                # "Truthful outcomes"); the text says all there is, so no traceback is logged.
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
            # An answer the provider could not accept (its schema, its nesting) is ``invalid``.
            kind: FailureKind = "invalid" if result.error_kind == "invalid_answer" else "provider"
            call.failure = AgentFailure.of(kind, result.error or (
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

    # ---- stopping ---------------------------------------------------------------------------

    def close(self) -> None:
        """Stop (once the ledger is closed): end the calls no worker has begun, queued and
        ready ones; the ledger's close cancelled the workers."""
        while self._queue:
            self._calls.end(self._queue.popleft())
        while self._ready:
            self._running -= 1
            self._calls.end(self._ready.popleft())

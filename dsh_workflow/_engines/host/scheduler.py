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
from datetime import datetime
from typing import Any

import anyio
from anyio.abc import TaskGroup

from ..._config import EngineConfig
from ..._depth import MAX_VALUE_DEPTH_CEILING, deeper_than, text_deeper_than
from ..._errors import WorkflowErrorCode
from ..._events import AgentOutcome, AgentRetried, AgentStarted, EventHub, RunInfo
from ..._failure import AgentFailure, ProviderUnavailable, bounded, redact
from ..._prices import load_async
from ..._schema_limits import SchemaLimits
from ..._subagent import ProviderInfo, SubagentProvider, SubagentResult, Usage, provider_info
from ..script.wire import SettleEntry, agent_failure, answer, refusal
from .budget import Spend
from .faults import RetryGates, fatal_text, final_cause, is_fatal, retry_delay
from .ledger import CallLedger, ChildCall
from .pricing import ChildPricing

__all__ = ["ChildScheduler", "structured_problems"]

logger = logging.getLogger("dsh_workflow.engine")

#: Most parked child workers a run keeps for its next calls (never more than its concurrency
#: cap); a worker that finds that many parked exits instead of parking.
_MAX_PARKED_WORKERS = 128

_AGENT_FAILED = WorkflowErrorCode.AGENT_FAILED.value
_BUDGET_EXCEEDED = WorkflowErrorCode.BUDGET_EXCEEDED

#: Most warnings a run keeps about children its dollar budget could not count.
_MAX_UNCOUNTED_WARNINGS = 20


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


def _plus(total: Usage | None, more: Usage | None) -> Usage | None:
    """Two usages summed; None when neither is known."""
    if more is None:
        return total
    return more if total is None else total + more


class ChildScheduler:
    """A run's children: slots, the FIFO, workers, and each child's one reply.

    Calls are opened and ended in the run's :class:`~.ledger.CallLedger` (``calls``). Once the
    ledger is closed, nothing more is admitted, run or sent to the runtime; :meth:`close` then
    ends the calls still waiting here.
    """

    def __init__(self, *, run_id: str, info: RunInfo, config: EngineConfig,
                 provider: SubagentProvider, events: EventHub, task_group: TaskGroup,
                 spend: Spend, limits: SchemaLimits, calls: CallLedger,
                 fail_run: Callable[[str, int, WorkflowErrorCode], None] =
                 lambda text, seq, code: None,
                 secrets: tuple[str, ...] = (),
                 declared: ProviderInfo | None = None, gates: RetryGates | None = None,
                 park_run: Callable[[datetime | None], None] | None = None) -> None:
        self._id = run_id
        # parks the run on a provider's usage limit (resume_after), with on_limit "park"
        self._park_run = park_run
        self._info = info
        self._config = config
        self._provider = provider
        # What the provider declares (its identity keys the retry gates, its secrets are
        # redacted from retry messages): given when ``provider`` is a wrapper of the real one.
        self._declared = declared if declared is not None else provider_info(provider)
        self._gates = gates if gates is not None else RetryGates()
        self._events = events
        self._tg = task_group
        self._spend = spend
        self._limits = limits
        self._calls = calls
        self._fail_run = fail_run  # ends the run with a fatal error (text, the agent's seq, code)
        self._secrets = secrets  # the run's secrets: out of every failure text made here
        self._pricing = ChildPricing(provider, config.model_prices, spend.budget_usd)
        #: Children the dollar budget could not count while a token budget held (one line
        #: per reason, bounded): the result's warnings.
        self.warnings: list[str] = []
        self._uncounted_seen: set[str] = set()  # the reasons warned about
        self.started = 0  # children given a slot (the result's agents_started)
        #: The first child whose failure is fatal (its provider raised or is unavailable).
        self.fatal_agent: int | None = None
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
            with anyio.CancelScope() as scope:
                call.scope = scope
                reply = await self._run_child(call)
            call.scope = None
            if scope.cancelled_caught:
                return  # the script cancelled it (cancel()), which ended and answered it
            call.reply, call.outcome = reply
            self._drop_too_deep(call)
            if call.outcome != "completed" and call.reply[1] is True \
                    and call.failure is not None:
                # A failed child's null carries its reason (settle() reports it), or with
                # failure: "throw" rejects with it.
                reason = call.failure.model_dump(mode="json")
                call.reply = agent_failure(call.call_id, reason) if call.throw \
                    else answer(call.call_id, None, reason)
            call.spent = self._spend.count(call.last_usage) or call.spent
            if call.uncounted is not None:
                self._uncounted(call, call.uncounted)
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
                # before its reply: the script cannot catch it
                self._fail_run(call.fatal, call.seq, call.fatal_code)
            elif call.limit is not None and self._park_run is not None \
                    and not self._calls.closed:
                # a usage limit parks the run before its reply: a resume runs the call again
                self._park_run(call.limit[0])
            if not journaled:
                self._calls.end(call)
            ticket = False  # the first call admitted here is this worker's next
            while self._queue and not self._calls.closed \
                    and self._running < self._config.max_concurrent_agents:
                self.admit(self._queue.popleft(), wake=ticket)
                ticket = True

    async def _run_child(self, call: ChildCall) -> tuple[SettleEntry, AgentOutcome]:
        try:
            timeout = self._config.agent_timeout_s
            if timeout is None:
                result = await self._attempts(call)
            else:
                with anyio.move_on_after(timeout) as timer:
                    result = await self._attempts(call)
                if timer.cancelled_caught:
                    call.failure = AgentFailure.of(
                        "timeout", f"the child ran longer than agent_timeout_s={timeout:g} and "
                        "was cancelled")
                    return answer(call.call_id, None), "timeout"
            if isinstance(result, SubagentResult) and result.usage is not None:
                usage, problem = await self._priced_usage(call, result)
                if problem is not None:  # nothing of it is counted; its answer is dropped
                    logger.info("dsh-workflow: %s#%d usage refused: %s", self._id, call.seq,
                                problem)
                    call.failure = AgentFailure.of("provider", problem, cause="invalid_answer")
                    return answer(call.call_id, None), "failed"
                call.last_usage = usage
                call.usage = _plus(call.usage, usage)
                call.uncounted = self._pricing.uncounted(usage, result, call.request)
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as exc:
            if self._calls.closed:
                return self._calls.cancelled_reply(call), "cancelled"
            if self.fatal_agent is None:
                self.fatal_agent = call.seq
            if isinstance(exc, ProviderUnavailable):
                # Every later child would hit it too: the run ends at once (docs/scripts.md,
                # "Truthful outcomes"); the text says all there is, so no traceback is logged.
                logger.info("dsh-workflow: provider unavailable for %s#%d: %s", self._id,
                               call.seq, _render(exc))
                call.failure = AgentFailure.of("provider", _render(exc), secrets=self._secrets)
                text = bounded(f"agent {call.seq} ({call.request.label}) failed: "
                               f"{call.failure.message}")
                call.fatal = f"{_AGENT_FAILED}: {text}"
                return refusal(call.call_id, _AGENT_FAILED, text), "failed"
            logger.warning("dsh-workflow: provider raised for %s#%d", self._id, call.seq,
                           exc_info=True)
            text = f"agent() failed: the subagent provider raised {type(exc).__name__}: " \
                   f"{_render(exc)}"
            call.failure = AgentFailure.of("provider", text, secrets=self._secrets)
            # The fatal error the script sees is the reason, redacted and bounded likewise.
            return refusal(call.call_id, _AGENT_FAILED, call.failure.message), "failed"
        # Decided on the loop: no coroutine per child unless a structured value needs checking.
        mapped = self._map_result(call, result)
        if mapped is not None:
            return mapped
        assert isinstance(result, SubagentResult) and call.request.schema is not None
        if result.stop_reason != "completed":  # an invalid answer: the engine says what is wrong
            return await self._invalid_answer(call, call.request.schema, result)
        return await self._validated(call, call.request.schema, result.structured)

    async def _attempts(self, call: ChildCall) -> object:
        """Call the provider for ``call`` until its result is not retried (module
        :mod:`.faults`): each retry emits ``AgentRetried`` and counts the failed attempt's
        usage (priced like any child's); a ``retry_at`` pauses every child of this provider
        identity (and route) through the shared gate; the child keeps its slot while it waits."""
        policy = self._config.retry
        key = f"{self._declared.identity}\x00{call.request.provider or ''}"
        attempt = 1
        while True:
            await self._gates.wait(key)
            result = await self._provider.run(call.request)
            if not isinstance(result, SubagentResult) or result.stop_reason == "completed":
                return result
            plan = retry_delay(policy, result, attempt)
            if plan is None or result.error_kind is None:
                call.attempts = attempt
                return result
            delay, shared = plan
            if self._calls.closed:  # the run is stopping: no retry to announce
                return result
            if shared:  # one pause for the provider's children; another may already be longer
                self._gates.close_for(key, delay)
                delay = max(delay, self._gates.remaining(key))
            usage = None
            if result.usage is not None:
                usage, problem = await self._priced_usage(call, result)
                if problem is not None:
                    logger.info("dsh-workflow: %s#%d attempt %d usage refused: %s", self._id,
                                call.seq, attempt, problem)
            call.usage = _plus(call.usage, usage)
            if self._spend.count(usage):
                call.spent = True
                if self._spend.exhausted():
                    self.refuse_queued()
            first = (result.error or result.error_kind).strip().split("\n", 1)[0]
            self._events.emit(AgentRetried(
                run=self._info, seq=call.seq, label=call.request.label, attempt=attempt,
                cause=result.error_kind, delay_s=round(delay, 3),
                message=bounded(redact(first, self._secrets), 300),
                usage=usage))
            logger.info("dsh-workflow: %s#%d attempt %d failed (%s), retrying in %.3fs",
                        self._id, call.seq, attempt, result.error_kind, delay)
            if not shared:
                await anyio.sleep(delay)  # then the gate's wait, should another child close it
            attempt += 1

    async def _priced_usage(self, call: ChildCall,
                            result: SubagentResult) -> tuple[Usage | None, str | None]:
        """One attempt's usage as the run counts it, priced at the seam (:mod:`.pricing`), or
        the reason it cannot be counted at all (numbers no sum may hold, a price from
        ``model_prices`` past the bounds): then nothing of it counts."""
        assert result.usage is not None
        problem = self._pricing.check(result.usage)
        if problem is not None:
            return None, f"its usage cannot be counted: {problem}"
        if self._pricing.needs_data(result, call.request):
            await load_async()  # once per process, on a worker thread
        usage = self._pricing.price(result, call.request)
        problem = self._pricing.check(usage) if usage is not None else None
        if problem is not None:
            return None, f"its cost cannot be counted: {problem}"
        return usage, None

    def _uncounted(self, call: ChildCall, reason: str) -> None:
        """A child the dollar budget cannot count: the run ends with fatal
        ``BUDGET_EXCEEDED``, or, under a token budget too, a warning names it."""
        text = f"the dollar budget cannot count {reason}"
        if self._spend.budget is None:
            call.fatal = (f"{_BUDGET_EXCEEDED.value}: {text} — give its price (--price "
                          "MODEL=IN/OUT, EngineConfig.model_prices) or limit tokens instead "
                          "(--budget, budget_tokens)")
            call.fatal_code = _BUDGET_EXCEEDED
            return
        why = reason.split(": ", 1)[-1]  # one warning per model (its first agent named)
        if why not in self._uncounted_seen and len(self.warnings) < _MAX_UNCOUNTED_WARNINGS:
            self._uncounted_seen.add(why)
            self.warnings.append(f"{text}; only the token budget limits it")

    def _map_result(self, call: ChildCall,
                    result: object) -> tuple[SettleEntry, AgentOutcome] | None:
        """The reply and outcome for a provider's result, or None when it is a structured
        value to be validated first (a completed result's, or an invalid answer's, for a call
        with a schema). The one place a failed result's cause decides between that child's
        failure and the run's end (:mod:`.faults`)."""
        if not isinstance(result, SubagentResult):
            text = ("agent() failed: the subagent provider returned "
                    f"{type(result).__name__}, not a SubagentResult")
            call.failure = AgentFailure.of("provider", text)
            # The fatal error the script sees is the reason, redacted and bounded likewise.
            return refusal(call.call_id, _AGENT_FAILED, call.failure.message), "failed"
        if result.stop_reason != "completed":
            cause = final_cause(self._config.retry, result)
            if cause == "invalid_answer" and call.request.schema is not None:
                return None
            secrets = self._secrets
            call.failure = AgentFailure.of("provider", result.error or (
                f"the provider ended the child with stop_reason {result.stop_reason!r} and "
                "gave no error text"), secrets=secrets, cause=cause)
            if cause == "limit" and self._config.on_limit == "park" \
                    and self._park_run is not None:
                call.limit = (result.retry_at,)
                logger.info("dsh-workflow: %s#%d parks the run on a usage limit (resets %s)",
                            self._id, call.seq, result.retry_at)
                return answer(call.call_id, None), "failed"
            if is_fatal(cause, retries_spent=True):
                # Every later child would hit it too: the run ends at once, naming the agent.
                text = bounded(redact(fatal_text(call.seq, call.request.label, cause,
                                                 call.failure.message, call.attempts), secrets))
                logger.info("dsh-workflow: %s#%d ends the run: %s", self._id, call.seq, text)
                call.fatal = f"{_AGENT_FAILED}: {text}"
                return refusal(call.call_id, _AGENT_FAILED, text), "failed"
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

    async def _invalid_answer(self, call: ChildCall, schema: dict[str, Any],
                              result: SubagentResult) -> tuple[SettleEntry, AgentOutcome]:
        """A provider's ``invalid_answer`` for a schema call: kind ``invalid`` with the
        engine's own validator details for its parsed value (``structured``), or a detail
        saying the answer is not JSON when it parsed none."""
        said = (result.error or "").strip()
        if result.structured is None and result.text \
                and text_deeper_than(result.text, MAX_VALUE_DEPTH_CEILING):
            problems = [f"/: the answer is nested deeper than {MAX_VALUE_DEPTH_CEILING} levels "
                        "(more than any max_value_depth allows)"]
        elif result.structured is None:
            began = f": it began {result.text.strip()[:120]!r}" if result.text else ""
            problems = [f"/: the answer is not JSON{began}"]
        else:
            problems = await anyio.to_thread.run_sync(structured_problems, schema,
                                                      result.structured, self._limits)
            if not problems:  # the provider's own check was stricter: keep its words
                problems = [f"/: {said.split(chr(10), 1)[0] or 'the answer was refused'}"]
        message = "; ".join(problems[:5]) + (f"\n{said}" if said else "")
        call.failure = AgentFailure.of("invalid", message, problems,
                                       secrets=self._secrets, cause="invalid_answer")
        logger.info("dsh-workflow: %s#%d invalid answer: %s", self._id, call.seq,
                    "; ".join(problems))
        return answer(call.call_id, None), "failed"

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

    def cancel(self, call: ChildCall, failure: AgentFailure) -> None:
        """End ``call`` now at the script's request (``first()``'s losers): it answers
        ``null`` with ``failure`` (kind ``cancelled``) and, if it started, ends ``cancelled``
        before this returns; a waiting call never starts, a running child's task is cancelled
        (its worker frees the slot). A call already answered, or held for the journal's
        commit, is left alone."""
        calls = self._calls
        if call not in calls.live or call.reply is not None or call.replay is not None:
            return
        call.failure, call.outcome = failure, "cancelled"
        call.reply = answer(call.call_id, None, failure.model_dump(mode="json"))
        if call in self._queue:
            self._queue.remove(call)
        elif call in self._ready:
            self._ready.remove(call)
            self._running -= 1
            while self._queue and self._running < self._config.max_concurrent_agents:
                self.admit(self._queue.popleft())
        elif call.scope is not None:
            call.scope.cancel()
        calls.end(call)

    # ---- stopping ---------------------------------------------------------------------------

    def close(self) -> None:
        """Stop (once the ledger is closed): end the calls no worker has begun, queued and
        ready ones; the ledger's close cancelled the workers."""
        while self._queue:
            self._calls.end(self._queue.popleft())
        while self._ready:
            self._running -= 1
            self._calls.end(self._ready.popleft())

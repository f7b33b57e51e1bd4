"""The host side of a run, shared by every engine: the run itself, its state and its end.

A :class:`HostedRun` drives one script runtime (a thread in-process, or a child process) that it
knows only as a :class:`~..script.wire.ScriptRuntime`: start it, settle hook calls, stop it,
and receive its reports (outbox batches, then one end). The run owns its
:class:`~.stop.RunState` and its one :data:`~.stop.StopCause`, and delegates each job to one
piece:

* :mod:`.serving` — where a hook call is served (checks, caps, the schema gate);
* :mod:`.scheduler` — where a child's slot is granted, and children run;
* :mod:`.ledger` — the open calls, and the one place a call ends and is answered;
* :mod:`.journal_writer` — a durable run's commits before the script sees an answer;
* :mod:`.outcome` — where the run's final result is decided and its error text rendered.

Everything runs on the event loop (except the schema gate's expensive stage and the validation
of structured values, which run on worker threads without changing the order calls are served
in).
"""

from __future__ import annotations

import logging
from collections import deque
from datetime import datetime
from typing import Any

import anyio
from anyio.abc import TaskGroup

from ..._agents import AgentRegistry
from ..._config import EngineConfig
from ..._errors import WorkflowErrorCode
from ..._events import EventHub, RunInfo, WorkflowEnded
from ..._library import WorkflowLibrary
from ..._meta import WorkflowMeta, meta_warnings
from ..._questions import AnswerProvider, AnswerReceipt, PendingQuestions, Question
from ..._result import WorkflowResult
from ..._run import WorkflowRun
from ..._schema_limits import SchemaLimits
from ..._store import RunStoreError
from ..._subagent import ProviderInfo, SubagentProvider
from ..script.limits import not_started
from ..script.wire import ReportKind, ScriptRuntime
from .budget import Spend
from .faults import RetryGates
from .journal import RunJournal
from .journal_writer import JournalWriter
from .ledger import CallLedger
from .outcome import CALLER_CANCELLED, ScriptText, cancel_message, final_result
from .questions import QuestionDesk
from .scheduler import ChildScheduler
from .serving import HookServer
from .stop import (
    Cancelled,
    Fault,
    Parked,
    RunState,
    RuntimeEnded,
    StopCause,
    TimedOut,
    prevails,
)

__all__ = ["HostedRun", "ScriptRuntime"]

#: How long a run past its deadline waits for its runtime's end before it times out: an end
#: already made arrives within a few turns of the event loop; a script still running is
#: stopped and answers with an end without an outcome (or, spinning, not at all).
END_AFTER_DEADLINE_S = 1.0

logger = logging.getLogger("dsh_workflow.engine")

_OUTBOX, _REST, _END = ReportKind.OUTBOX.value, ReportKind.REST.value, ReportKind.END.value
_RUNNING, _STOPPING, _SETTLED = RunState.RUNNING, RunState.STOPPING, RunState.SETTLED


class HostedRun(WorkflowRun):
    """A run driven from the event loop. Built only by an engine's ``start()``."""

    def __init__(self, *, run_id: str, meta: WorkflowMeta, config: EngineConfig,
                 provider: SubagentProvider, max_total_agents: int, parent: Any,
                 secrets: tuple[str, ...] = (),
                 events: EventHub, task_group: TaskGroup, budget_tokens: int | None = None,
                 budget_usd: float | None = None,
                 body_line_offset: int = 0, body_header_chars: int = 0,
                 agents: AgentRegistry | None = None, journal: RunJournal | None = None,
                 library: WorkflowLibrary | None = None,
                 declared: ProviderInfo | None = None, gates: RetryGates | None = None,
                 answers: AnswerProvider | None = None, park: bool = False) -> None:
        self.id = run_id
        self.meta = meta
        self._config = config
        self._events = events
        self._tg = task_group
        self._info = RunInfo(id=run_id, meta=meta)
        self._journal = journal
        self._spend = Spend(budget_tokens,
                            config.budget_usd if budget_usd is None else budget_usd)
        self._text = ScriptText(meta, body_line_offset, body_header_chars)
        limits = SchemaLimits.of(config)
        self._calls = CallLedger(
            info=self._info, config=config, events=events, spend=self._spend,
            cancel_message=self._cancel_message, fail_run=self._agents_failed,
            journaled=journal is not None)
        self._children = ChildScheduler(
            run_id=run_id, info=self._info, config=config, provider=provider, events=events,
            task_group=task_group, spend=self._spend, limits=limits, calls=self._calls,
            fail_run=self._agents_failed, secrets=secrets, declared=declared, gates=gates,
            park_run=self._limit_reached)
        self._journal_writer = None if journal is None else JournalWriter(
            journal, self._calls, self._store_failed)
        self._questions = QuestionDesk(
            run_id=run_id, info=self._info, events=events, task_group=task_group,
            runtime=lambda: self._calls.runtime, journal=journal, answers=answers, park=park,
            on_park=self._park)
        self._hooks = HookServer(
            run_id=run_id, info=self._info, config=config, events=events, calls=self._calls,
            scheduler=self._children, spend=self._spend, limits=limits,
            max_total_agents=max_total_agents, parent=parent, agents=agents, library=library,
            journal=journal, frames=self._text.frames, fault=self._record,
            questions=self._questions)
        self._runtime: ScriptRuntime | None = None

        self._state = RunState.CREATED
        self._cause: StopCause | None = None
        self._past_deadline = False  # run_timeout_s has passed (see _deadline_passed)
        self._result: WorkflowResult | None = None
        #: What launch() did: None not yet, True the runtime started, False it did not.
        self._started: bool | None = None
        # (ReportKind, payload) not yet served, in order
        self._reports: deque[tuple[str, Any]] = deque()
        self._pump_busy = False  # the pump is serving: later reports queue behind it
        self._pump_scope: anyio.CancelScope | None = None
        self._wake = anyio.Event()
        self._runtime_gone = anyio.Event()
        self._runtime_exited = anyio.Event()
        self._exit_signalled = False
        self._done = anyio.Event()
        self._end_recorded = anyio.Event()  # set once record_end() has returned
        self._disposed: anyio.Event | None = None  # set once dispose() finished, if begun

    # ---- public contract -----------------------------------------------------------------

    async def result(self) -> WorkflowResult:
        await self._done.wait()
        journal = self._journal
        if journal is not None and journal.began:
            # A caller may act on the result at once (print it, exit): a stored run's end is
            # committed first, so a crash after that can never leave it reading "interrupted".
            await self._end_recorded.wait()
        assert self._result is not None
        return self._result

    def cancel(self, reason: str | None = None) -> None:
        if self._record(Cancelled(reason if reason else CALLER_CANCELLED)):
            self._stop()

    async def dispose(self) -> None:
        if self._disposed is not None:
            await self._disposed.wait()
            return
        self._disposed = anyio.Event()
        try:
            self.cancel("workflow disposed")
            with anyio.move_on_after(self._config.dispose_grace_s):
                await self._done.wait()
                await self.wait_runtime_gone()
            self._settle()
        finally:
            self._disposed.set()

    def pending(self) -> PendingQuestions:
        return self._questions.pending()

    def answer(self, qid: str, value: object, *, by: str = "caller") -> AnswerReceipt:
        return self._questions.answer(qid, value, by)

    @property
    def questions(self) -> QuestionDesk:
        """The run's questions (the control poll delivers answers from the store to it)."""
        return self._questions

    async def wait_runtime_gone(self) -> None:
        """Wait until the runtime has sent its last report and then exited."""
        await self._runtime_gone.wait()
        if self._exit_signalled:
            await self._runtime_exited.wait()
        pause = 0.0001 if self._exit_signalled else 0.001
        while self._runtime is not None and self._runtime.is_alive():
            # Freeing its context after its last report or, once it signalled, only its
            # thread's teardown is left (which needs the GIL for a moment): poll, backing off.
            await anyio.sleep(pause)
            pause = min(2 * pause, 0.001)

    def runtime_exited(self) -> None:
        """Note that the runtime has released everything; call on the event-loop thread, and
        only for a runtime attached with ``signals_exit=True``."""
        self._runtime_exited.set()

    @property
    def journal(self) -> RunJournal | None:
        """The run's durable record (engines with a store), else None."""
        return self._journal

    @property
    def budget_tokens(self) -> int | None:
        """The run's token budget (None: unlimited), for the runtime's ``budget`` global."""
        return self._spend.budget

    @property
    def budget_usd(self) -> float | None:
        """The run's dollar budget (None: unlimited), for the runtime's ``budget`` global."""
        return self._spend.budget_usd

    @property
    def ended(self) -> bool:
        """True once the result is settled and the runtime has released its context."""
        return self._done.is_set() and self._runtime_gone.is_set()

    @property
    def state(self) -> RunState:
        """Where the run is in its life."""
        return self._state

    # ---- state ----------------------------------------------------------------------------

    def _stopping(self) -> bool:
        state = self._state
        return state is _STOPPING or state is _SETTLED

    def _record(self, cause: StopCause) -> bool:
        """Make ``cause`` the run's stop cause if it prevails (see :func:`.stop.prevails`);
        True if it did. Nothing changes once the run has settled."""
        if self._state is _SETTLED or not prevails(cause, self._cause):
            return False
        self._cause = cause
        return True

    def _cancel_message(self) -> str:
        return cancel_message(self._cause, self._config, self._children.fatal_agent)

    # ---- wiring ---------------------------------------------------------------------------

    def attach(self, runtime: ScriptRuntime, *, signals_exit: bool = False) -> None:
        """Give the run its runtime (before :meth:`drive` starts). ``signals_exit``: the
        runtime calls :meth:`runtime_exited` once it has released everything after its end
        report, always (otherwise its exit is polled)."""
        self._runtime = runtime
        self._calls.runtime = runtime
        self._exit_signalled = signals_exit

    def launch(self) -> None:
        """Start the runtime, once. An engine may call this from ``start()``, so the script
        begins at once instead of after the drive task's first turn; :meth:`drive` calls it
        otherwise. A runtime that fails to start ends the run with that failure."""
        if self._started is not None:
            return
        self._started = False
        assert self._runtime is not None
        if self._stopping():
            self._runtime_gone.set()
            return
        try:
            self._runtime.start()
        except Exception as exc:  # noqa: BLE001 - e.g. no thread or process available
            self.on_runtime_start_failed(exc)
            return
        self._started = True
        if self._state is RunState.CREATED:
            self._state = _RUNNING

    def report(self, kind: str, payload: Any) -> None:
        """Receive a runtime report (a :class:`~..script.wire.ReportKind`); must be called on the
        event-loop thread.

        An outbox batch that nothing is queued ahead of is served right here (up to
        ``serving.SERVE_SLICE`` messages; the pump task serves the rest after yielding), which
        saves a task switch per batch; everything else goes to the pump in order."""
        if kind == _END:
            # Past the deadline, an end without an outcome is the stop's doing: the timeout.
            self._record(TimedOut() if payload is None and self._past_deadline
                         else RuntimeEnded(payload))
            self._runtime_gone.set()
            if not self._pump_busy and not self._reports and not self._calls.live:
                # Nothing left to serve or reap: settle now, not a task switch later.
                self._settle()
                return
        elif kind == _OUTBOX and not self._pump_busy and not self._reports \
                and not self._stopping():
            self._serve_now(payload)
            return
        self._reports.append((kind, payload))
        self._wake.set()

    def on_runtime_start_failed(self, exc: BaseException) -> None:
        """Record that the runtime could not even start (e.g. no thread available)."""
        self._record(RuntimeEnded(not_started(exc)))
        self._runtime_gone.set()

    async def drive(self) -> None:
        """The run's main task: start the runtime, serve its hook calls, settle the result.
        With a store, the run is recorded (and a resumed run's journal loaded) first."""
        try:
            if self._journal_writer is not None and not self._stopping():
                assert self._journal is not None
                try:
                    await self._journal.begin()
                except RunStoreError as exc:
                    self._store_failed(exc)
                else:
                    self._tg.start_soon(self._journal_writer.run,
                                        name=f"dsh-workflow journal of {self.id}")
            self.launch()
            if self._started:
                with anyio.CancelScope() as self._pump_scope:
                    if self._stopping():
                        self._pump_scope.cancel()
                    timeout = self._config.run_timeout_s
                    with anyio.move_on_after(timeout if timeout is not None else float("inf")) \
                            as timer:
                        await self._pump()
                    if timer.cancelled_caught:
                        await self._deadline_passed()
            await self._wind_down()
        except anyio.get_cancelled_exc_class():
            # Cancelled from outside the run (the engine's task group is being torn down).
            self._record(Cancelled("the workflow engine was shut down"))
            self._stop()
            raise
        except Exception:
            logger.exception("dsh-workflow: run %s failed inside the engine", self.id)
            self._record(Fault("the workflow engine failed while serving this run (a bug; see "
                               "the host's log)", overrides=True))
            self._stop()
        finally:
            self._settle()

    # ---- runtime reports ------------------------------------------------------------------

    async def _pump(self) -> None:
        hooks = self._hooks
        while True:
            self._pump_busy = False
            await self._wake.wait()
            self._pump_busy = True
            self._wake = anyio.Event()
            self._children.spawn_owed()
            self._questions.spawn_owed()
            while self._reports:
                kind, payload = self._reports.popleft()
                if kind == _END:
                    return
                if self._stopping():
                    continue
                messages = hooks.decode(payload) if kind == _OUTBOX else payload
                start = 0
                while messages is not None and not self._stopping():
                    start = hooks.serve_slice(messages, start)
                    if start >= len(messages):
                        break
                    if hooks.gating is not None:
                        start = await hooks.gate(messages, start)
                    else:
                        await anyio.lowlevel.checkpoint()
                if isinstance(self._cause, Fault):
                    self._stop()
                    return

    async def _deadline_passed(self) -> None:
        """``run_timeout_s`` has passed: the runtime is told to stop and its end report is
        awaited (within :data:`END_AFTER_DEADLINE_S`) before the timeout may become the stop
        cause. An end that carries the script's own outcome was made before the stop reached
        the script: the script ended in time and only the host was late to read its end (a
        busy machine; a slow event listener), so it stands, whatever the host's load. An end
        without one (the stop ended the script), or none in time, makes the run time out."""
        self._past_deadline = True
        if self._runtime is not None and not self._runtime_gone.is_set():
            self._runtime.stop()
            with anyio.move_on_after(min(self._config.dispose_grace_s, END_AFTER_DEADLINE_S)):
                await self._runtime_gone.wait()
        ended = self._cause
        if isinstance(ended, RuntimeEnded) and ended.outcome is not None:
            return
        if self._record(TimedOut()):
            self._stop()

    def _serve_now(self, text: str) -> None:
        """Serve an outbox batch from :meth:`report`; a long batch's rest goes to the pump."""
        hooks, children = self._hooks, self._children
        messages = hooks.decode(text)
        if messages is not None:
            # a plain loop callback: no task to spawn workers (or a question's tasks) from
            children.deferring = self._questions.deferring = True
            try:
                start = hooks.serve_slice(messages, 0)
            finally:
                children.deferring = self._questions.deferring = False
            if start < len(messages) and not self._stopping():
                self._reports.append((_REST, messages[start:]))
            if children.owed_workers or self._questions.owed or self._reports:
                self._wake.set()
        if isinstance(self._cause, Fault):
            self._stop()

    def _agents_failed(self, text: str, seq: int | None = None,
                       code: WorkflowErrorCode = WorkflowErrorCode.AGENT_FAILED) -> None:
        """The children's fault ends the run: a provider unavailable for every child, or the
        failure ceiling passed (``text`` starts with ``AGENT_FAILED:``), or a child the dollar
        budget cannot count (``BUDGET_EXCEEDED``); ``seq``: the agent whose failure ended it."""
        self._record(Fault(text, code=code, agent=seq))
        self._stop()

    # ---- the run store ---------------------------------------------------------------------

    def _park(self, pending: tuple[Question, ...]) -> None:
        """The script waits on nothing but questions nobody is there to answer: the run parks
        (docs/durable-runs.md, "Runs that wait")."""
        if self._record(Parked("question", pending)):
            self._stop()

    def _limit_reached(self, resume_after: datetime | None) -> None:
        """A child hit its provider's usage limit (``on_limit="park"``): the run parks until
        ``resume_after``; the children still running are cancelled (a resume runs them)."""
        if self._record(Parked("limit", resume_after=resume_after)):
            self._stop()

    def _store_failed(self, exc: RunStoreError) -> None:
        if not isinstance(self._cause, Fault):
            logger.error("dsh-workflow: run %s: the run store failed: %s", self.id, exc)
        self._record(Fault(f"the run store failed, so this run cannot keep its journal: {exc}"))
        self._stop()

    async def record_end(self) -> None:
        """Record the settled result in the store (runs with a store; call once the run has
        settled). Bounded by ``dispose_grace_s``; a failing store is logged, never raised."""
        journal, result = self._journal, self._result
        try:
            if journal is None or result is None or not journal.began:
                return
            with anyio.CancelScope(shield=True), \
                    anyio.move_on_after(max(self._config.dispose_grace_s, 1.0)):
                try:
                    await journal.finish(result.stop_reason, result.model_dump(mode="json"),
                                         agents=result.agents_started,
                                         replayed=result.agents_replayed, usage=result.usage,
                                         failed=result.agents_failed)
                except RunStoreError as exc:
                    # The store's own text names the failure; its traceback would only repeat it.
                    logger.error("dsh-workflow: run %s: its end could not be recorded: %s",  # noqa: TRY400 - see above
                                 self.id, exc)
        finally:
            self._end_recorded.set()

    # ---- stopping and settling ------------------------------------------------------------

    def _stop(self) -> None:
        """Stop everything: no more hooks served, runtime told to stop, children cancelled,
        queued calls dropped unstarted."""
        if self._state is not _SETTLED:
            self._state = _STOPPING
        if self._runtime is not None:
            self._runtime.stop()
        self._calls.close()
        self._children.close()
        self._questions.close()
        if self._pump_scope is not None:
            self._pump_scope.cancel()

    async def _wind_down(self) -> None:
        """After the script ended (or was stopped): reap strays within the grace, then settle."""
        self._stop()
        calls = self._calls
        if calls.live:
            calls.children_gone = anyio.Event()
            with anyio.move_on_after(self._config.dispose_grace_s):
                await calls.children_gone.wait()

    def _settle(self) -> None:
        """Settle the one result (idempotent); synthesizes ends for children that would not end."""
        if self._state is _SETTLED:
            return
        self._stop()
        self._calls.abandon()
        result = final_result(self._cause, started=self._children.started,
                              failed=self._calls.failed, cancelled=self._calls.cancelled,
                              replayed=self._hooks.replayed, usage=self._spend.usage(),
                              text=self._text, config=self._config,
                              unpriced=self._spend.unpriced,
                              warnings=[*self._hooks.warnings, *self._children.warnings],
                              meta_notes=meta_warnings(self.meta)
                              if isinstance(self.meta, WorkflowMeta) else ())
        self._result = result
        self._state = _SETTLED
        if self._journal is not None:
            self._journal.settled()  # resumable at once, though its end is recorded just after
        self._events.emit(WorkflowEnded(run=self._info, stop_reason=result.stop_reason,
                                        waiting_reason=result.waiting_reason,
                                        error=result.error, error_code=result.error_code,
                                        agents_started=result.agents_started,
                                        usage=result.usage, agents_failed=result.agents_failed,
                                        agents_cancelled=result.agents_cancelled))
        self._done.set()

"""The host side of a run, shared by every engine: hook rules, caps, children, events.

A :class:`HostedRun` drives one script runtime (a thread in-process, or a child process) that it
knows only through :class:`ScriptRuntime`: start it, settle hook calls by id, stop it, and
receive its reports (outbox batches, then one end). Everything else lives here, on the event
loop (except the schema gate's expensive stage and the validation of structured values, which
run on worker threads without changing the order calls are served in): option checks, the total-agent cap, the FIFO concurrency limit, running children (on
worker tasks reused from call to call) under cancel scopes and timeouts, event pairing,
cancellation, timeouts and the one result.
"""

from __future__ import annotations

import json
import logging
import re
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Protocol

import anyio
from anyio.abc import TaskGroup

from .._agents import AgentRegistry
from .._library import WorkflowLibrary
from .._store import JournalEntry, RunStoreError
from .._config import EngineConfig
from .._depth import deeper_than
from .._errors import ENGINE_FAILED, SCRIPT_FAILED, WorkflowError, WorkflowErrorCode
from .._events import (
    AgentEnded,
    AgentOutcome,
    AgentReplayed,
    AgentStarted,
    EventHub,
    LogEmitted,
    PhaseStarted,
    RunInfo,
    WorkflowEnded,
)
from .._meta import WorkflowMeta
from .._result import WorkflowResult
from .._run import WorkflowRun
from .._schema import (
    GateTicket,
    SchemaLimits,
    finish_schema_check,
    prepare_schema_check,
    unsupported_schema,
    value_violations,
)
from .._subagent import SubagentProvider, SubagentRequest, SubagentResult, Usage
from .journal import RunJournal, call_key
from .options import default_label, parse_agent_options

__all__ = ["HostedRun", "ScriptRuntime"]

logger = logging.getLogger("dsh_workflow.engine")

_CODES = {code.value for code in WorkflowErrorCode}
#: A QuickJS stack-frame line ("    at f (<input>:3:5)" or "    at <input>:3:5"): only such
#: lines are rewritten or dropped, never a message line that merely mentions a position.
_FRAME_LINE = re.compile(r"^\s+at (?:.* \()?<input>:(\d+):(\d+)\)?\s*$")
#: Texts only the engine writes; a script's own error text that starts so is marked as the
#: script's (see :meth:`HostedRun._render_error`).
_ENGINE_PREFIXES = tuple(f"{code.value}:" for code in WorkflowErrorCode) + (
    "workflow runtime failed", "the script runtime", "the workflow run exceeded",
    "the workflow engine failed", "workflow run cancelled", "the script is waiting for a promise",
    "the sandbox process")


def _outcome_code(outcome: dict[str, Any]) -> WorkflowErrorCode:
    """The code of a failed outcome (see ``RuntimeThread`` for its shape): the engine's code
    it names; else the script's failure when the script threw it or stalled; else (no code,
    not thrown: the runtime or the sandbox process failed) the engine's failure."""
    code = outcome.get("code")
    if isinstance(code, str) and code in _CODES:
        return WorkflowErrorCode(code)
    if code == "STALLED" or outcome.get("thrown") is True:
        return SCRIPT_FAILED
    return ENGINE_FAILED


def _render(exc: BaseException) -> str:
    """``str(exc)``, or a fixed label when even that fails."""
    try:
        return str(exc)
    except Exception:  # noqa: BLE001
        return "[unrenderable exception]"


def _structured_problems(schema: dict[str, Any], value: object,
                         limits: SchemaLimits) -> list[str]:
    """Why a child's structured ``value`` is rejected (``[]``: accepted); for a worker thread."""
    try:
        json.dumps(value, allow_nan=False)
        return value_violations(schema, value, limits=limits)
    except (TypeError, ValueError, RecursionError):
        return ["the structured value is not JSON data"]


class ScriptRuntime(Protocol):
    """What the host needs of a script runtime (see ``RuntimeThread`` for the contract)."""

    def start(self) -> None: ...

    def settle(self, entry: list[Any]) -> None: ...

    def stop(self) -> None: ...

    def is_alive(self) -> bool: ...


@dataclass(eq=False)
class _Call:
    """One accepted ``agent()`` call."""

    call_id: int
    seq: int
    request: SubagentRequest
    started: bool = False
    ended: bool = False
    outcome: AgentOutcome | None = None
    reply: list[Any] | None = field(default=None, repr=False)
    usage: Usage | None = None  # what the provider reported, once it returned
    key: str | None = None  # the journal key (runs with a store)
    replay: JournalEntry | None = None  # the earlier run's answer, for a replayed call
    spent: bool = False  # its usage raised the run's tokens spent (the script is told)


#: Messages served in one go before the loop gets a turn.
_SERVE_SLICE = 256

#: Most parked child workers a run keeps for its next calls (never more than its concurrency
#: cap); a worker that finds that many parked exits instead of parking.
_MAX_PARKED_WORKERS = 128


class HostedRun(WorkflowRun):
    """A run driven from the event loop. Built only by an engine's ``start()``."""

    def __init__(self, *, run_id: str, meta: WorkflowMeta, config: EngineConfig,
                 provider: SubagentProvider, max_total_agents: int, parent: Any,
                 events: EventHub, task_group: TaskGroup, budget_tokens: int | None = None,
                 body_line_offset: int = 0, body_header_chars: int = 0,
                 agents: AgentRegistry | None = None, journal: RunJournal | None = None,
                 library: WorkflowLibrary | None = None) -> None:
        self.id = run_id
        self._library = library
        self._workflow_calls = 0
        self._journal = journal
        # calls whose answer waits for its journal commit (completed live ones, replayed ones)
        self._journaling: deque[_Call] = deque()
        self._journal_wake = anyio.Event()
        self._replayed = 0
        self._agents = agents
        self.meta = meta
        self._config = config
        self._provider = provider
        self._max_total = max_total_agents
        self._parent = parent
        self._events = events
        self._tg = task_group
        self._info = RunInfo(id=run_id, meta=meta)
        self._line_offset = body_line_offset
        self._header_chars = body_header_chars
        self._runtime: ScriptRuntime | None = None

        # ("outbox", text), ("rest", messages not yet served), ("end", outcome), in order
        self._reports: deque[tuple[str, Any]] = deque()
        self._launched = False
        self._serving = False  # the runtime started: reports will come and must be served
        self._pump_busy = False  # the pump is serving: later reports queue behind it
        self._in_report = False  # serving inside report(): no task context to spawn from
        self._owed_workers = 0  # workers to spawn once the pump runs
        self._wake = anyio.Event()
        self._runtime_gone = anyio.Event()
        self._runtime_exited = anyio.Event()
        self._exit_signalled = False
        self._done = anyio.Event()
        self._children_gone: anyio.Event | None = None  # set once _live empties, if awaited
        self._pump_scope: anyio.CancelScope | None = None
        self._live: set[_Call] = set()  # accepted calls not yet ended (queued or running)
        self._queue: deque[_Call] = deque()  # accepted calls waiting for a slot, in call order
        self._ready: deque[_Call] = deque()  # calls given a slot, not yet taken by a worker
        self._running = 0  # slots in use: calls ready or being run
        self._parked: list[anyio.Event] = []  # wake-ups of idle workers
        self._workers: set[anyio.CancelScope] = set()
        self._keep_parked = min(config.max_concurrent_agents, _MAX_PARKED_WORKERS)

        self._limits = SchemaLimits.of(config)
        # the agent() call whose schema awaits the gate's worker thread, with its ticket
        self._gating: tuple[int, GateTicket] | None = None

        self._phase: str | None = None
        self._narrated = 0
        self._refused = 0
        self._accepted = 0
        self._agents_started = 0
        self._budget = budget_tokens  # None: unlimited
        self._input_tokens = 0
        self._output_tokens = 0
        self._stopping = False
        self._cancel_reason: str | None = None
        self._timed_out = False
        self._outcome: dict[str, Any] | None = None
        self._fault: str | None = None
        self._fault_code = ENGINE_FAILED  # the code of the result _fault ends the run with
        self._result: WorkflowResult | None = None
        self._disposing = False
        self._disposed = anyio.Event()

    # ---- public contract -----------------------------------------------------------------

    async def result(self) -> WorkflowResult:
        await self._done.wait()
        assert self._result is not None
        return self._result

    def cancel(self, reason: str | None = None) -> None:
        if self._result is not None or self._cancel_reason is not None or self._timed_out:
            return
        self._cancel_reason = reason if reason else "workflow cancelled"
        self._stop()

    async def dispose(self) -> None:
        if self._disposing:
            await self._disposed.wait()
            return
        self._disposing = True
        try:
            self.cancel("workflow disposed")
            with anyio.move_on_after(self._config.dispose_grace_s):
                await self._done.wait()
                await self.wait_runtime_gone()
            self._settle()
        finally:
            self._disposed.set()

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
        return self._budget

    @property
    def ended(self) -> bool:
        """True once the result is settled and the runtime has released its context."""
        return self._done.is_set() and self._runtime_gone.is_set()

    # ---- wiring ---------------------------------------------------------------------------

    def attach(self, runtime: ScriptRuntime, *, signals_exit: bool = False) -> None:
        """Give the run its runtime (before :meth:`drive` starts). ``signals_exit``: the
        runtime calls :meth:`runtime_exited` once it has released everything after its end
        report, always (otherwise its exit is polled)."""
        self._runtime = runtime
        self._exit_signalled = signals_exit

    def launch(self) -> None:
        """Start the runtime, once. An engine may call this from ``start()``, so the script
        begins at once instead of after the drive task's first turn; :meth:`drive` calls it
        otherwise. A runtime that fails to start ends the run with that failure."""
        if self._launched:
            return
        self._launched = True
        assert self._runtime is not None
        if self._stopping:
            self._runtime_gone.set()
            return
        try:
            self._runtime.start()
        except Exception as exc:  # noqa: BLE001 - e.g. no thread or process available
            self.on_runtime_start_failed(exc)
            return
        self._serving = True

    def report(self, kind: str, payload: Any) -> None:
        """Receive a runtime report; must be called on the event-loop thread.

        An outbox batch that nothing is queued ahead of is served right here (up to
        ``_SERVE_SLICE`` messages; the pump task serves the rest after yielding), which saves
        a task switch per batch; everything else goes to the pump in order."""
        if kind == "end":
            self._outcome = payload
            self._runtime_gone.set()
            if not self._pump_busy and not self._reports and not self._live:
                # Nothing left to serve or reap: settle now, not a task switch later.
                self._settle()
                return
        elif kind == "outbox" and not self._pump_busy and not self._reports \
                and not self._stopping:
            self._serve_now(payload)
            return
        self._reports.append((kind, payload))
        self._wake.set()

    async def drive(self) -> None:
        """The run's main task: start the runtime, serve its hook calls, settle the result.
        With a store, the run is recorded (and a resumed run's journal loaded) first."""
        try:
            if self._journal is not None and not self._stopping:
                try:
                    await self._journal.begin()
                except RunStoreError as exc:
                    self._store_failed(exc)
                else:
                    self._tg.start_soon(self._journal_writer,
                                        name=f"dsh-workflow journal of {self.id}")
            self.launch()
            if self._serving:
                with anyio.CancelScope() as self._pump_scope:
                    if self._stopping:
                        self._pump_scope.cancel()
                    timeout = self._config.run_timeout_s
                    with anyio.move_on_after(timeout if timeout is not None else float("inf")) \
                            as timer:
                        await self._pump()
                    if timer.cancelled_caught:
                        self._time_out()
            await self._wind_down()
        except anyio.get_cancelled_exc_class():
            # Cancelled from outside the run (the engine's task group is being torn down).
            if self._result is None and self._cancel_reason is None and not self._timed_out:
                self._cancel_reason = "the workflow engine was shut down"
            self._stop()
            raise
        except Exception:
            logger.exception("dsh-workflow: run %s failed inside the engine", self.id)
            self._fail("the workflow engine failed while serving this run (a bug; see the "
                       "host's log)")
            self._stop()
        finally:
            self._settle()

    # ---- runtime reports ------------------------------------------------------------------

    async def _pump(self) -> None:
        while True:
            self._pump_busy = False
            await self._wake.wait()
            self._pump_busy = True
            self._wake = anyio.Event()
            while self._owed_workers and not self._stopping:
                self._owed_workers -= 1
                self._spawn_worker()
            while self._reports:
                kind, payload = self._reports.popleft()
                if kind == "end":
                    return
                if self._stopping:
                    continue
                messages = self._decode(payload) if kind == "outbox" else payload
                start = 0
                while messages is not None and not self._stopping:
                    start = self._serve_slice(messages, start)
                    if start >= len(messages):
                        break
                    if self._gating is not None:
                        start = await self._gate(messages, start)
                    else:
                        await anyio.lowlevel.checkpoint()
                if self._fault is not None:
                    self._stop()
                    return

    def _serve_now(self, text: str) -> None:
        """Serve an outbox batch from :meth:`report`; a long batch's rest goes to the pump."""
        messages = self._decode(text)
        if messages is not None:
            self._in_report = True
            try:
                start = self._serve_slice(messages, 0)
            finally:
                self._in_report = False
            if start < len(messages) and not self._stopping:
                self._reports.append(("rest", messages[start:]))
            if self._owed_workers or self._reports:
                self._wake.set()
        if self._fault is not None:
            self._stop()

    def _decode(self, text: str) -> list[Any] | None:
        try:
            messages = json.loads(text)
        except ValueError:
            messages = None
        if not isinstance(messages, list):
            self._fail("the script runtime sent a malformed message")
            return None
        return messages

    def _serve_slice(self, messages: list[Any], start: int) -> int:
        """Serve ``messages`` in order from ``start``, at most ``_SERVE_SLICE`` of them (so a
        flood of log() calls cannot monopolize the loop); returns where to go on from. Stops
        at an ``agent()`` call whose schema needs the gate's worker thread (``_gating`` is then
        set): the pump runs :meth:`_gate` for it, so later messages wait in call order."""
        end = min(len(messages), start + _SERVE_SLICE)
        for index in range(start, end):
            if self._stopping:
                return len(messages)
            message = messages[index]
            if not (isinstance(message, list) and message and isinstance(message[0], str)):
                self._fail("the script runtime sent a malformed message")
                return len(messages)
            kind = message[0]
            if kind in ("phase", "log") and len(message) == 2 and isinstance(message[1], str):
                self._narrate(kind, message[1])
            elif (kind == "agent" and len(message) == 4 and type(message[1]) is int
                  and isinstance(message[2], str)):
                if len(message[2]) > self._config.max_prompt_chars:
                    # The runtime checks this first; the host does not rely on it.
                    self._refuse(message[1], WorkflowErrorCode.INVALID_ARGUMENT, (
                        f"agent() prompt is {len(message[2])} characters — over the per-prompt "
                        f"cap (max_prompt_chars={self._config.max_prompt_chars}); shorten it or "
                        "pass less data"))
                    continue
                if not self._on_agent(message[1], message[2], message[3]):
                    return index  # its schema goes through the gate first: see _gate()
            elif kind == "workflow" and len(message) == 4 and type(message[1]) is int:
                self._on_workflow(message[1], message[2], message[3])
            elif (kind == "numbers" and len(message) == 4 and self._journal is not None
                  and message[1] in ("clock", "random") and type(message[2]) is int
                  and isinstance(message[3], list)
                  and all(type(v) in (int, float) for v in message[3])):
                self._journal.post_numbers(message[1], message[2], message[3])
            else:
                self._fail(f"the script runtime sent an unknown message {kind!r}")
                return len(messages)
        return end

    def _narrate(self, kind: str, text: str) -> None:
        cut = self._config.max_log_chars
        if len(text) > cut:
            # The runtime cuts first; the host does not rely on it.
            text = text[:cut] + ("…" if kind == "phase" else "… [truncated]")
        if kind == "phase":
            self._phase = text  # the current phase holds even when its event is dropped
        self._narrated += 1
        limit = self._config.max_log_events
        if self._narrated > limit:
            if self._narrated == limit + 1:
                self._events.emit(LogEmitted(run=self._info, message=(
                    f"[log limit reached (max_log_events={limit}): further phase() and log() "
                    "events of this run are dropped]")))
            return
        if kind == "phase":
            self._events.emit(PhaseStarted(run=self._info, title=text))
            return
        if "<input>:" in text:  # a logged error's stack: show the script's own lines
            text = self._script_frames(text)
        self._events.emit(LogEmitted(run=self._info, message=text))

    async def _gate(self, messages: list[Any], index: int) -> int:
        """Check the schema of the ``agent()`` call at ``messages[index]`` on a worker thread,
        then serve the call with that verdict; returns the index after it.

        The pump awaits this, so the messages after the call (and later batches) wait behind
        it: calls are still admitted, refused and numbered in call order. If the run is
        cancelled meanwhile, the thread finishes its bounded check (the gate's limits bound
        it) and the verdict is dropped with the call."""
        assert self._gating is not None
        call_id, ticket = self._gating
        verdict = await anyio.to_thread.run_sync(finish_schema_check, ticket, self._limits)
        self._gating = None
        if not self._stopping:
            message = messages[index]
            self._on_agent(message[1], message[2], message[3], verdict=(call_id, verdict))
        return index + 1

    def _on_agent(self, call_id: int, prompt: str, raw_options: object, *,
                  verdict: tuple[int, tuple[str, ...]] | None = None) -> bool:
        """Accept or refuse one ``agent()`` call. Returns False, doing nothing else, when the
        call's schema has no verdict yet (not cached): ``_gating`` then holds its ticket, and
        the caller serves it again through :meth:`_gate`. Schema-less calls and cached
        verdicts never leave the loop."""
        try:
            options = parse_agent_options(raw_options, check_schema=False)
        except WorkflowError as exc:
            self._refuse(call_id, exc.code, exc.message)
            return True
        if options.schema is not None:
            if verdict is not None and verdict[0] == call_id:
                violations = verdict[1]
            else:
                ticket = prepare_schema_check(options.schema, self._limits)
                if ticket.violations is None:
                    self._gating = (call_id, ticket)
                    return False
                violations = ticket.violations
            if violations:
                refusal = unsupported_schema(violations)
                self._refuse(call_id, refusal.code, refusal.message)
                return True
        if self._budget_spent():
            self._refuse(call_id, WorkflowErrorCode.BUDGET_EXCEEDED, self._budget_message())
            return True
        if self._accepted >= self._max_total:
            self._refuse(call_id, WorkflowErrorCode.AGENT_CAP, (
                f"agent() refused: this run reached its total agent cap (max_total_agents="
                f"{self._max_total}) — a backstop against runaway loops; use fewer agent() calls "
                "or raise max_total_agents if the scale is intentional"))
            return True
        definition = None
        if options.agent_type is not None and self._agents is not None:
            try:
                definition = self._agents.resolve(options.agent_type)
            except WorkflowError as exc:
                self._refuse(call_id, exc.code, exc.message)
                return True
        self._accepted += 1
        seq = self._accepted
        # pydantic-core validates these few fields faster than model_construct() assigns them.
        cut = self._config.max_log_chars
        label = options.label if options.label is not None else default_label(prompt)
        phase = options.phase if options.phase is not None else self._phase
        model = options.model
        if model is None and definition is not None:
            model = definition.model
        aliases = self._config.model_aliases
        if aliases and model is not None:
            model = aliases.get(model, model)
        request = SubagentRequest(
            prompt=prompt,
            label=label if len(label) <= cut else label[:cut] + "…",
            phase=phase if phase is None or len(phase) <= cut else phase[:cut] + "…",
            schema=options.schema, model=model, provider=options.provider,
            parent=self._parent, run_id=self.id, seq=seq, effort=options.effort,
            agent_type=options.agent_type, isolation=options.isolation, agent=definition)
        call = _Call(call_id=call_id, seq=seq, request=request)
        self._live.add(call)
        if self._journal is not None:
            call.key = call_key(request, self._journal.identity)
            call.replay = self._journal.replay(call.key)
            if call.replay is not None:
                self._replayed += 1
                self._events.emit(AgentReplayed(run=self._info, seq=seq, label=request.label,
                                                phase=request.phase))
                self._journaling.append(call)
                self._journal_wake.set()
                return True
        if self._running < self._config.max_concurrent_agents:
            self._admit(call)
        else:
            self._queue.append(call)
        return True

    def _on_workflow(self, call_id: int, target: object, args: object) -> None:
        """Answer ``workflow(name | {scriptPath}, args)`` with the saved workflow's body, which
        the runtime then runs inline (sharing this run's caps, budget, journal and events)."""
        library = self._library
        self._workflow_calls += 1
        if self._workflow_calls > self._max_total:
            self._refuse(call_id, WorkflowErrorCode.AGENT_CAP, (
                f"workflow() refused: this run started {self._max_total} saved workflows "
                f"(max_total_agents={self._max_total} bounds workflow() calls too) — a backstop "
                "against runaway recursion"))
            return
        if library is None:
            self._refuse(call_id, WorkflowErrorCode.INVALID_ARGUMENT, (
                "workflow() needs an engine with a workflow library (library=...); no saved "
                "workflows are available (available: none)"))
            return
        if isinstance(target, str):
            found = library.get(target)
            if found is None:
                self._refuse(call_id, WorkflowErrorCode.INVALID_ARGUMENT, (
                    f"workflow({target!r}): no saved workflow has that name (available: "
                    f"{library.describe_names()})"))
                return
        elif isinstance(target, dict) and isinstance(target.get("scriptPath"), str):
            try:
                found = library.resolve_script_path(target["scriptPath"])
            except ValueError as exc:
                self._refuse(call_id, WorkflowErrorCode.INVALID_ARGUMENT,
                             f"workflow({{scriptPath}}): {exc}")
                return
        else:
            self._fail("the script runtime sent a malformed workflow() call")
            return
        assert self._runtime is not None
        if not self._stopping:
            self._runtime.settle([call_id, True, {"name": found.name, "body": found.body,
                                                  "args": args}])

    def _admit(self, call: _Call, *, wake: bool = True) -> None:
        """Give ``call`` a concurrency slot and hand it to a worker. Slots are handed out here,
        synchronously and in call order, and workers take calls from a FIFO, entering the
        provider before they next yield, so providers are entered in call order whatever order
        the scheduler runs tasks in. ``wake=False``: the calling worker takes it itself."""
        self._running += 1
        call.started = True
        self._agents_started += 1
        if self._budget is not None:
            remaining = self._budget - self._input_tokens - self._output_tokens
            call.request = call.request.model_copy(update={"max_output_tokens": remaining})
        self._events.emit(AgentStarted(
            run=self._info, seq=call.seq, label=call.request.label, phase=call.request.phase,
            model=call.request.model))
        self._ready.append(call)
        if not wake:
            return
        if self._parked:
            self._parked.pop().set()
        elif self._in_report:
            self._owed_workers += 1  # report() runs as a plain loop callback, outside any task
        else:
            self._spawn_worker()

    def _spawn_worker(self) -> None:
        self._tg.start_soon(self._worker, name=f"dsh-workflow children of {self.id}")

    def _refuse(self, call_id: int, code: WorkflowErrorCode | str, message: str) -> None:
        assert self._runtime is not None
        self._runtime.settle([call_id, False, str(code), message])
        self._refused += 1
        limit = self._config.max_refused_calls
        if self._refused > limit and self._fault is None:
            self._fail(
                f"{WorkflowErrorCode.RESOURCE_LIMIT.value}: the script kept calling agent() "
                f"after {limit} refused calls (max_refused_calls={limit}); the last refusal was "
                f"{code}: {message}", WorkflowErrorCode.RESOURCE_LIMIT)

    def _fail(self, text: str, code: WorkflowErrorCode = ENGINE_FAILED) -> None:
        """End the run with ``text`` as its error and ``code`` as its code (unless a stop
        cause that outranks a fault comes first: see :meth:`_unbounded_result`)."""
        self._fault, self._fault_code = text, code

    # ---- children -------------------------------------------------------------------------

    async def _worker(self) -> None:
        """Run ready calls one after another, parking in between; ends when the run stops.

        A worker is reused across calls (spawning a task per call costs more than the call
        itself on a fast provider); its cancel scope is cancelled by :meth:`_stop`."""
        wake: anyio.Event | None = None
        with anyio.CancelScope() as scope:
            self._workers.add(scope)
            try:
                while not self._stopping:
                    if self._ready:
                        await self._run_call(self._ready.popleft())
                    elif len(self._parked) >= self._keep_parked:
                        return
                    else:
                        wake = anyio.Event()
                        self._parked.append(wake)
                        await wake.wait()
            finally:
                self._workers.discard(scope)
                if wake is not None and not wake.is_set() and wake in self._parked:
                    self._parked.remove(wake)

    async def _run_call(self, call: _Call) -> None:
        journaled = False
        try:
            call.reply, call.outcome = await self._run_child(call)
            self._drop_too_deep(call)
            call.spent = self._count_usage(call.usage)
            if call.spent and self._budget_spent():
                self._refuse_queued()
            if call.outcome == "completed" and self._journal is not None:
                # Its answer reaches the script once the journal writer has committed it.
                journaled = True
                self._journaling.append(call)
                self._journal_wake.set()
        except Exception:
            logger.exception("dsh-workflow: child %s#%d failed inside the engine", self.id,
                             call.seq)
            call.reply = [call.call_id, False, WorkflowErrorCode.AGENT_FAILED.value,
                          "agent() failed inside the workflow engine (a bug; see the host's log)"]
            call.outcome = "failed"
        finally:
            self._running -= 1
            if not journaled:
                self._end_call(call)
            ticket = False  # the first call admitted here is this worker's next
            while self._queue and not self._stopping \
                    and self._running < self._config.max_concurrent_agents:
                self._admit(self._queue.popleft(), wake=ticket)
                ticket = True

    async def _run_child(self, call: _Call) -> tuple[list[Any], AgentOutcome]:
        request = call.request
        try:
            timeout = self._config.agent_timeout_s
            if timeout is None:
                result = await self._provider.run(request)
            else:
                with anyio.move_on_after(timeout) as timer:
                    result = await self._provider.run(request)
                if timer.cancelled_caught:
                    return [call.call_id, True, None], "timeout"
            if isinstance(result, SubagentResult):
                call.usage = result.usage
        except anyio.get_cancelled_exc_class():
            raise
        except Exception as exc:
            if self._stopping:
                return self._cancelled_reply(call), "cancelled"
            logger.warning("dsh-workflow: provider raised for %s#%d", self.id, call.seq,
                           exc_info=True)
            return [call.call_id, False, WorkflowErrorCode.AGENT_FAILED.value, (
                "agent() failed: the subagent provider raised "
                f"{type(exc).__name__}: {_render(exc)}")], "failed"
        return await self._map_result(call, result)

    async def _map_result(self, call: _Call, result: object) -> tuple[list[Any], AgentOutcome]:
        """The reply and outcome for a provider's result. A structured value is validated on a
        worker thread (bounded by the schema limits; cancellation waits for it and drops it)."""
        if not isinstance(result, SubagentResult):
            return [call.call_id, False, WorkflowErrorCode.AGENT_FAILED.value, (
                "agent() failed: the subagent provider returned "
                f"{type(result).__name__}, not a SubagentResult")], "failed"
        if result.stop_reason != "completed":
            return [call.call_id, True, None], "failed"
        schema = call.request.schema
        if schema is None:
            return [call.call_id, True, result.text if result.text is not None else ""], \
                "completed"
        value = result.structured
        if value is None:
            return [call.call_id, True, None], "failed"
        problems = await anyio.to_thread.run_sync(_structured_problems, schema, value,
                                                  self._limits)
        if problems:
            logger.info("dsh-workflow: %s#%d structured value rejected: %s", self.id, call.seq,
                        "; ".join(problems))
            return [call.call_id, True, None], "failed"
        return [call.call_id, True, value], "completed"

    def _cancelled_reply(self, call: _Call) -> list[Any]:
        return [call.call_id, False, WorkflowErrorCode.CANCELLED.value, self._cancel_message()]

    def _end_call(self, call: _Call) -> None:
        """Close a call exactly once: its paired end event, its settlement, its slot in _live."""
        if call not in self._live:
            return
        self._live.discard(call)
        if call.reply is None:
            call.reply, call.outcome = self._cancelled_reply(call), "cancelled"
        spent_changed = call.spent
        if call.started and not call.ended:
            call.ended = True
            self._events.emit(AgentEnded(
                run=self._info, seq=call.seq, label=call.request.label, phase=call.request.phase,
                outcome=call.outcome or "cancelled", usage=call.usage))
        if self._runtime is not None and not self._stopping:
            if spent_changed:
                # The script's budget.spent() is current before it sees this child's value.
                self._runtime.settle(["spent", self._input_tokens + self._output_tokens])
            self._runtime.settle(call.reply)
        if not self._live and self._children_gone is not None:
            self._children_gone.set()

    def _drop_too_deep(self, call: _Call) -> None:
        """An answer nested deeper than ``max_value_depth`` becomes a failed child: the script's
        JSON.parse recurses, and the configuration guarantees the stack holds only that deep."""
        assert call.reply is not None
        if call.reply[1] is True and deeper_than(call.reply[2], self._config.max_value_depth):
            logger.info("dsh-workflow: %s#%d answer nested deeper than max_value_depth=%d "
                        "dropped", self.id, call.seq, self._config.max_value_depth)
            call.reply, call.outcome = [call.call_id, True, None], "failed"

    # ---- the journal (runs with a store) ---------------------------------------------------

    async def _journal_writer(self) -> None:
        """Commit answers to the journal before the script can see them: completed children
        and calls replayed from the earlier run (so a resume of this run replays them too).
        Everything that arrived meanwhile is committed as one batch, then answered in call
        order; a store that fails ends the run, and those answers are never delivered."""
        journal = self._journal
        assert journal is not None
        batch: list[_Call] = []
        with anyio.CancelScope() as scope:
            self._workers.add(scope)
            try:
                while not self._stopping:
                    await self._journal_wake.wait()
                    self._journal_wake = anyio.Event()
                    batch = list(self._journaling)
                    self._journaling.clear()
                    if not batch:
                        continue
                    entries = []
                    for call in batch:
                        assert call.key is not None
                        earlier = call.replay
                        if earlier is not None:
                            text, structured, usage = earlier.text, earlier.structured, \
                                earlier.usage
                        else:
                            assert call.reply is not None
                            value = call.reply[2]
                            typed = call.request.schema is not None
                            text, structured, usage = (None if typed else value,
                                                       value if typed else None, call.usage)
                        entries.append(journal.entry(call.seq, call.key, text=text,
                                                     structured=structured, usage=usage))
                    try:
                        await journal.commit(entries)
                    except RunStoreError as exc:
                        self._store_failed(exc)
                        return
                    for call in batch:
                        earlier = call.replay
                        if earlier is not None:
                            value = earlier.structured if call.request.schema is not None \
                                else (earlier.text if earlier.text is not None else "")
                            call.reply, call.outcome = [call.call_id, True, value], "completed"
                        self._end_call(call)
                    batch = []
            finally:
                self._workers.discard(scope)
                for call in batch:  # stopped mid-commit: close them unanswered
                    self._end_call(call)

    def _store_failed(self, exc: RunStoreError) -> None:
        if self._fault is None:
            logger.error("dsh-workflow: run %s: the run store failed: %s", self.id, exc)
            self._fail(f"the run store failed, so this run cannot keep its journal: {exc}")
        self._stop()

    async def record_end(self) -> None:
        """Record the settled result in the store (runs with a store; call once the run has
        settled). Bounded by ``dispose_grace_s``; a failing store is logged, never raised."""
        journal, result = self._journal, self._result
        if journal is None or result is None or not journal.began:
            return
        with anyio.CancelScope(shield=True), \
                anyio.move_on_after(max(self._config.dispose_grace_s, 1.0)):
            try:
                await journal.finish(result.stop_reason, result.model_dump(mode="json"),
                                     agents=result.agents_started,
                                     replayed=result.agents_replayed, usage=result.usage)
            except RunStoreError as exc:
                logger.error("dsh-workflow: run %s: its end could not be recorded: %s",
                             self.id, exc)

    # ---- usage and budget -----------------------------------------------------------------

    def _count_usage(self, usage: Usage | None) -> bool:
        """Add a child's reported usage to the run's totals; True when the tokens spent grew."""
        if usage is None:
            return False
        self._input_tokens += usage.input_tokens
        self._output_tokens += usage.output_tokens
        return usage.input_tokens + usage.output_tokens > 0

    def _budget_spent(self) -> bool:
        return self._budget is not None and \
            self._input_tokens + self._output_tokens >= self._budget

    def _budget_message(self) -> str:
        return (f"agent() refused: this run has spent its token budget (budget_tokens="
                f"{self._budget}; spent {self._input_tokens + self._output_tokens} tokens) — "
                "no further agents can start; return what the run has so far, or raise "
                "budget_tokens")

    def _refuse_queued(self) -> None:
        """The ceiling was reached: every call still waiting for a slot throws
        ``BUDGET_EXCEEDED`` instead of starting."""
        while self._queue:
            call = self._queue.popleft()
            call.reply = [call.call_id, False, WorkflowErrorCode.BUDGET_EXCEEDED.value,
                          self._budget_message()]
            self._end_call(call)

    def _usage(self) -> Usage:
        return Usage(input_tokens=self._input_tokens, output_tokens=self._output_tokens)

    # ---- stopping and settling ------------------------------------------------------------

    def _cancel_message(self) -> str:
        if self._timed_out:
            return self._timeout_message()
        return f"workflow run cancelled: {self._cancel_reason or 'workflow settled'}"

    def _timeout_message(self) -> str:
        return (f"the workflow run exceeded its wall-clock limit (run_timeout_s="
                f"{self._config.run_timeout_s:g})")

    def _time_out(self) -> None:
        if self._result is None and self._cancel_reason is None:
            self._timed_out = True
            self._stop()

    def _stop(self) -> None:
        """Stop everything: no more hooks served, runtime told to stop, children cancelled,
        queued calls dropped unstarted."""
        self._stopping = True
        if self._runtime is not None:
            self._runtime.stop()
        self._drop_queue()
        for scope in list(self._workers):
            scope.cancel()
        if self._pump_scope is not None:
            self._pump_scope.cancel()

    def _drop_queue(self) -> None:
        """End the calls no worker has begun: queued ones, ready ones and replays not yet
        answered."""
        while self._journaling:
            self._end_call(self._journaling.popleft())
        while self._queue:
            self._end_call(self._queue.popleft())
        while self._ready:
            self._running -= 1
            self._end_call(self._ready.popleft())

    async def _wind_down(self) -> None:
        """After the script ended (or was stopped): reap strays within the grace, then settle."""
        self._stop()
        if self._live:
            self._children_gone = anyio.Event()
            with anyio.move_on_after(self._config.dispose_grace_s):
                await self._children_gone.wait()

    def _settle(self) -> None:
        """Settle the one result (idempotent); synthesizes ends for children that would not end."""
        if self._result is not None:
            return
        self._stop()
        for call in sorted(self._live, key=lambda c: c.seq):
            if call.started and not call.ended:
                call.ended = True
                self._events.emit(AgentEnded(run=self._info, seq=call.seq,
                                             label=call.request.label, phase=call.request.phase,
                                             outcome="cancelled"))
        self._result = self._final_result()
        self._events.emit(WorkflowEnded(run=self._info, stop_reason=self._result.stop_reason,
                                        error=self._result.error,
                                        error_code=self._result.error_code,
                                        agents_started=self._result.agents_started,
                                        usage=self._result.usage))
        self._done.set()

    def _final_result(self) -> WorkflowResult:
        result = self._unbounded_result()
        if self._input_tokens or self._output_tokens:
            result = result.model_copy(update={"usage": self._usage()})
        if self._replayed:
            result = result.model_copy(update={"agents_replayed": self._replayed})
        cap = self._config.max_error_chars
        if result.error is not None and len(result.error) > cap:
            more = len(result.error) - cap
            result = result.model_copy(update={
                "error": result.error[:cap] + f"\n… [truncated: {more} more characters]"})
        return result

    def _unbounded_result(self) -> WorkflowResult:
        """The result before its usage and error length are settled. Every non-completed
        result gets its code here, from what ended the run (never from its own text): the
        code of a prefixed text, ``CANCELLED`` for a cancel, and for unprefixed texts the
        codes of the table in ``dsh_workflow._errors``."""
        started = self._agents_started
        if self._cancel_reason is not None:
            return WorkflowResult(stop_reason="cancelled", agents_started=started,
                                  error=f"workflow run cancelled: {self._cancel_reason}",
                                  error_code=WorkflowErrorCode.CANCELLED)
        if self._timed_out:
            return WorkflowResult(stop_reason="error", agents_started=started,
                                  error=f"{WorkflowErrorCode.TIMEOUT.value}: "
                                        f"{self._timeout_message()}",
                                  error_code=WorkflowErrorCode.TIMEOUT)
        if self._fault is not None:
            return WorkflowResult(stop_reason="error", agents_started=started,
                                  error=self._fault, error_code=self._fault_code)
        outcome = self._outcome
        if outcome is None:
            return WorkflowResult(stop_reason="error", agents_started=started,
                                  error="the script runtime stopped without a result",
                                  error_code=ENGINE_FAILED)
        if outcome.get("ok") is True:
            return WorkflowResult(stop_reason="completed", agents_started=started,
                                  value=outcome.get("value"))
        return WorkflowResult(stop_reason="error", agents_started=started,
                              error=self._render_error(outcome),
                              error_code=_outcome_code(outcome))

    def _render_error(self, outcome: dict[str, Any]) -> str:
        """The error text of a failed outcome: never empty, and a script's own text never
        passes for the engine's (a head that starts like an engine text is marked)."""
        code = outcome.get("code")
        error = outcome.get("error")
        text = error if isinstance(error, str) else ""
        if code == "STALLED":
            return text or "the script stalled"
        if isinstance(code, str) and code in _CODES:
            return f"{code}: {text or 'the engine gave no detail'}"
        if not text.strip():
            text = "the script threw an error whose text is empty"
        elif outcome.get("thrown") is True and text.startswith(_ENGINE_PREFIXES):
            text = "the script's own error: " + text
        stack = outcome.get("stack")
        if isinstance(stack, str) and stack:
            frames = self._script_frames(stack)
            if frames:
                text = text + "\n" + frames
        return text

    def _script_frames(self, text: str) -> str:
        """Rewrite the positions of stack-frame lines to the script's own lines and drop the
        runtime's frames; every other line is kept as it is (blank lines go)."""
        name = self.meta.name
        lines: list[str] = []
        for line in text.split("\n"):
            found = _FRAME_LINE.match(line)
            if found is None:
                if line.strip():
                    lines.append(line)
                continue
            row, col = int(found.group(1)), int(found.group(2))
            if row <= self._line_offset:
                continue
            row -= self._line_offset
            if row == 1:
                col = max(1, col - self._header_chars)
            lines.append(line[: found.start(1) - len("<input>:")] + f"workflow:{name}:{row}:{col}"
                         + line[found.end(2):])
        return "\n".join(lines)

    def on_runtime_start_failed(self, exc: BaseException) -> None:
        """Record that the runtime could not even start (e.g. no thread available)."""
        self._outcome = {"ok": False, "code": None,
                         "error": f"the script runtime could not start: {exc}"}
        self._runtime_gone.set()

"""Hook serving: where the script's hook calls (``agent``, ``workflow``, ``phase``, ``log``,
``numbers``, ``cancel``, ``ask``, ``idle``) are checked and answered, in call order.

The host trusts nothing the runtime sends: every message's shape is checked here (a malformed
one is a protocol fault that ends the run), and the caps the runtime enforces are enforced
again. Accepted ``agent()`` calls go to the :class:`~.scheduler.ChildScheduler` (a replayed one
to the :class:`~.ledger.CallLedger`, to be committed again first); everything else is answered
at once; questions go to the run's :class:`~.questions.QuestionDesk`. Nor is the journal
trusted: an answer replayed from it passes the checks a live answer passes (schema,
``max_value_depth``), or the call runs live.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from ..._agents import AgentRegistry
from ..._config import EngineConfig
from ..._depth import deeper_than
from ..._errors import WorkflowError, WorkflowErrorCode
from ..._events import AgentReplayed, EventHub, LogEmitted, PhaseStarted, RunInfo
from ..._failure import AgentFailure
from ..._library import WorkflowLibrary
from ..._schema_limits import SchemaLimits
from ..._subagent import SubagentRequest
from ..._text import LONE_SURROGATE, MAX_WARNINGS, json_may_hold_surrogates, valid_data
from ..script.wire import HookKind, answer, refusal
from .agent_options import default_label, parse_agent_options
from .budget import Spend
from .journal import RunJournal, call_key
from .ledger import CallLedger, ChildCall
from .questions import QuestionDesk
from .scheduler import ChildScheduler, structured_problems
from .stop import Fault

if TYPE_CHECKING:
    from ..._schema import GateTicket
    from ..._store import JournalEntry

__all__ = ["SERVE_SLICE", "HookServer"]

logger = logging.getLogger("dsh_workflow.engine")

#: Messages served in one go before the loop gets a turn.
SERVE_SLICE = 256

_MALFORMED = "the script runtime sent a malformed message"
_AGENT, _WORKFLOW, _NUMBERS = HookKind.AGENT.value, HookKind.WORKFLOW.value, \
    HookKind.NUMBERS.value
_CANCEL = HookKind.CANCEL.value
_ASK, _IDLE = HookKind.ASK.value, HookKind.IDLE.value
_QUESTION_KINDS = ("ask", "checkpoint")
#: The kinds of journaled numbers: Date.now(), Math.random(), first()'s winners.
_NUMBER_KINDS = ("clock", "random", "race")
#: Why a call first() cancelled did not complete (its AgentEnded.error).
_LOST_RACE = "first() cancelled it: another thunk won the race"

_NARRATION = (HookKind.PHASE.value, HookKind.LOG.value)
_PHASE = HookKind.PHASE.value


@dataclass(frozen=True)
class _ReplayCheck:
    """An accepted call and the earlier run's answer for it, awaiting the schema check."""

    call: ChildCall
    entry: JournalEntry


class HookServer:
    """Serves one run's hook messages. ``fault(cause)`` records a fault that ends the run
    (the caller stops the run once the current slice is served)."""

    def __init__(self, *, run_id: str, info: RunInfo, config: EngineConfig,
                 events: EventHub, calls: CallLedger, scheduler: ChildScheduler, spend: Spend,
                 limits: SchemaLimits, max_total_agents: int, parent: Any,
                 agents: AgentRegistry | None, library: WorkflowLibrary | None,
                 journal: RunJournal | None, frames: Callable[[str], str],
                 fault: Callable[[Fault], object],
                 questions: QuestionDesk | None = None) -> None:
        self._id = run_id
        self._info = info
        self._config = config
        self._events = events
        self._calls = calls
        self._scheduler = scheduler
        self._spend = spend
        self._limits = limits
        self._max_total = max_total_agents
        self._parent = parent
        self._agents = agents
        self._library = library
        self._journal = journal
        self._frames = frames
        self._fault = fault
        self._phase: str | None = None
        self._narrated = 0
        self._refused = 0
        self._accepted = 0  # agent() calls accepted (what max_total_agents counts)
        self._seq = 0  # calls numbered so far: agent() calls and questions share one seq
        self._questions = questions
        self._workflow_calls = 0
        self.replayed = 0  # calls answered from the earlier run's journal
        #: What the script's text lost on its way in (a lone surrogate made U+FFFD), once per
        #: hook: the result's warnings.
        self.warnings: list[str] = []
        #: The agent() call whose schema awaits the gate's worker thread, with its ticket; or
        #: an accepted call whose journaled answer awaits its check against the schema.
        self.gating: tuple[int, GateTicket] | _ReplayCheck | None = None

    def decode(self, text: str) -> list[Any] | None:
        """The messages of one outbox text; None (and a fault) when it is not a JSON list."""
        try:
            messages = json.loads(text)
        except ValueError:
            messages = None
        if not isinstance(messages, list):
            self._fault(Fault(_MALFORMED, overrides=True))
            return None
        listed: list[Any] = messages
        if json_may_hold_surrogates(text):
            # A prompt, label, title or log line from JavaScript may hold half an emoji; every
            # event, record and request made from it must be text UTF-8 can hold.
            listed = [self._valid_message(message) for message in listed]
        return listed

    def _valid_message(self, message: Any) -> Any:
        """``message`` with its text made valid (:func:`valid_data`); a hook whose text held
        a lone surrogate is named once in :attr:`warnings` (bounded), and in the log."""
        fixed, notes = valid_data(message, "script output")
        if notes:
            kind = message[0] if isinstance(message, list) and message \
                and isinstance(message[0], str) else "a hook"
            note = f"text given to {kind}(): {LONE_SURROGATE}"
            if note not in self.warnings and len(self.warnings) < MAX_WARNINGS:
                self.warnings.append(note)
            logger.warning("dsh-workflow: %s: %s", self._id, note)
        return fixed

    def serve_slice(self, messages: list[Any], start: int) -> int:
        """Serve ``messages`` in order from ``start``, at most ``SERVE_SLICE`` of them (so a
        flood of log() calls cannot monopolize the loop); returns where to go on from. Stops
        at an ``agent()`` call whose schema needs the gate's worker thread (:attr:`gating` is
        then set): the caller runs :meth:`gate` for it, so later messages wait in call order."""
        end = min(len(messages), start + SERVE_SLICE)
        calls = self._calls
        for index in range(start, end):
            if calls.closed:
                return len(messages)
            message = messages[index]
            if not (isinstance(message, list) and message and isinstance(message[0], str)):
                self._fault(Fault(_MALFORMED, overrides=True))
                return len(messages)
            kind = message[0]
            if kind in _NARRATION and len(message) == 2 and isinstance(message[1], str):
                self._narrate(kind, message[1])
            elif (kind == _AGENT and len(message) == 4 and type(message[1]) is int
                  and isinstance(message[2], str)):
                if len(message[2]) > self._config.max_prompt_chars:
                    # The runtime checks this first; the host does not rely on it.
                    self._refuse(message[1], WorkflowErrorCode.INVALID_ARGUMENT, (
                        f"agent() prompt is {len(message[2])} characters — over the per-prompt "
                        f"cap (max_prompt_chars={self._config.max_prompt_chars}); shorten it or "
                        "pass less data"))
                    continue
                if not self._on_agent(message[1], message[2], message[3]):
                    return index  # its schema goes through the gate first: see gate()
            elif kind == _WORKFLOW and len(message) == 4 and type(message[1]) is int:
                self._on_workflow(message[1], message[2], message[3])
            elif (kind == _NUMBERS and len(message) == 4 and self._journal is not None
                  and message[1] in _NUMBER_KINDS and type(message[2]) is int
                  and isinstance(message[3], list)
                  and all(type(v) in (int, float) for v in message[3])):
                self._journal.post_numbers(message[1], message[2], message[3])
            elif (kind == _CANCEL and len(message) == 2 and isinstance(message[1], list)
                  and all(type(v) is int for v in message[1])):
                self._cancel(message[1])
            elif (kind == _ASK and len(message) == 5 and type(message[1]) is int
                  and message[2] in _QUESTION_KINDS and isinstance(message[3], str)
                  and self._questions is not None):
                if len(message[3]) > self._config.max_prompt_chars:
                    self._refuse(message[1], WorkflowErrorCode.INVALID_ARGUMENT, (
                        f"{message[2]}() question is {len(message[3])} characters — over the "
                        f"per-prompt cap (max_prompt_chars={self._config.max_prompt_chars})"))
                    continue
                self._seq += 1
                self._questions.ask(message[1], self._seq, message[2], message[3], message[4],
                                    self._phase)
            elif (kind == _IDLE and len(message) == 2 and type(message[1]) is int
                  and self._questions is not None):
                self._questions.idle()
            else:
                self._fault(Fault(f"the script runtime sent an unknown message {kind!r}",
                                  overrides=True))
                return len(messages)
        return end

    async def gate(self, messages: list[Any], index: int) -> int:
        """Check the schema of the ``agent()`` call at ``messages[index]`` on a worker thread,
        then serve the call with that verdict; returns the index after it.

        The caller awaits this, so the messages after the call (and later batches) wait behind
        it: calls are still admitted, refused and numbered in call order. If the run stops
        meanwhile, the thread finishes its bounded check (the gate's limits bound it) and the
        verdict is dropped with the call.

        For a call answered from the journal (:class:`_ReplayCheck`), the check is the one a
        live answer gets (``structured_problems``): passed, the call is replayed; failed, it
        runs live, so an answer journaled under another schema, or altered, never reaches the
        script. A call can need both checks in turn (its schema new to this process, then its
        journaled answer): both run here before the index moves past it, or the call would
        never be answered."""
        assert self.gating is not None
        if isinstance(self.gating, _ReplayCheck):
            call, earlier = self.gating.call, self.gating.entry
            assert call.request.schema is not None
            problems = await anyio.to_thread.run_sync(structured_problems, call.request.schema,
                                                      earlier.structured, self._limits)
            self.gating = None
            if not self._calls.closed:
                self._replay_or_run(call, earlier, valid=not problems)
            return index + 1
        call_id, ticket = self.gating
        from ..._schema import finish_schema_check

        verdict = await anyio.to_thread.run_sync(finish_schema_check, ticket, self._limits)
        self.gating = None
        if not self._calls.closed:
            message = messages[index]
            if not self._on_agent(message[1], message[2], message[3], verdict=(call_id, verdict)):
                # Accepted, and its journaled answer now awaits its own check (gating holds it).
                return await self.gate(messages, index)
        return index + 1

    def _narrate(self, kind: str, text: str) -> None:
        cut = self._config.max_log_chars
        if len(text) > cut:
            # The runtime cuts first; the host does not rely on it.
            text = text[:cut] + ("…" if kind == _PHASE else "… [truncated]")
        if kind == _PHASE:
            self._phase = text  # the current phase holds even when its event is dropped
        self._narrated += 1
        limit = self._config.max_log_events
        if self._narrated > limit:
            if self._narrated == limit + 1:
                self._events.emit(LogEmitted(run=self._info, message=(
                    f"[log limit reached (max_log_events={limit}): further phase() and log() "
                    "events of this run are dropped]")))
            return
        if kind == _PHASE:
            self._events.emit(PhaseStarted(run=self._info, title=text))
            return
        if "<input>:" in text:  # a logged error's stack: show the script's own lines
            text = self._frames(text)
        self._events.emit(LogEmitted(run=self._info, message=text))

    def _on_agent(self, call_id: int, prompt: str, raw_options: object, *,
                  verdict: tuple[int, tuple[str, ...]] | None = None) -> bool:
        """Accept or refuse one ``agent()`` call. Returns False, doing nothing else, when the
        call's schema has no verdict yet (not cached): :attr:`gating` then holds its ticket,
        and the caller serves it again through :meth:`gate`. Schema-less calls and cached
        verdicts never leave the loop. A call accepted whose journaled answer awaits its check
        (:attr:`gating` holds it) is not accepted again when its message is served again."""
        pending = self.gating
        if isinstance(pending, _ReplayCheck) and pending.call.call_id == call_id:
            return False
        try:
            options = parse_agent_options(raw_options, check_schema=False)
        except WorkflowError as exc:
            self._refuse(call_id, exc.code, exc.message)
            return True
        if options.schema is not None:
            if verdict is not None and verdict[0] == call_id:
                violations = verdict[1]
            else:
                # jsonschema loads with the first schema, never for runs without one
                from ..._schema import prepare_schema_check

                ticket = prepare_schema_check(options.schema, self._limits)
                if ticket.violations is None:
                    self.gating = (call_id, ticket)
                    return False
                violations = ticket.violations
            if violations:
                from ..._schema import unsupported_schema

                rejected = unsupported_schema(violations)
                self._refuse(call_id, rejected.code, rejected.message)
                return True
        if self._spend.exhausted():
            self._refuse(call_id, WorkflowErrorCode.BUDGET_EXCEEDED,
                         self._spend.refusal_message())
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
        self._seq += 1
        seq = self._seq
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
            parent=self._parent, run_id=self._id, seq=seq, effort=options.effort,
            agent_type=options.agent_type, isolation=options.isolation, agent=definition)
        call = ChildCall(call_id=call_id, seq=seq, request=request, throw=options.throw)
        journal = self._journal
        if journal is not None:
            call.key = call_key(request, journal.identity)
            earlier = journal.replay(call.key)
            if earlier is not None:
                if request.schema is not None and earlier.structured is not None \
                        and not deeper_than(earlier.structured, self._config.max_value_depth):
                    # Its value is checked against the schema on a worker thread, as a live
                    # answer is; later messages wait (see gate()).
                    self.gating = _ReplayCheck(call, earlier)
                    return False
                self._replay_or_run(call, earlier, valid=request.schema is None
                                    and earlier.text is not None and earlier.structured is None)
                return True
            if journal.calls is not None:
                journal.calls.opened(request, None)
        self._scheduler.offer(call)
        return True

    def _cancel(self, call_ids: list[int]) -> None:
        """End the calls ``first()`` lost with (``["cancel", ids]``), before any later message
        is served: each answers null, and a started child ends ``cancelled``. Ids of calls
        already answered (or never accepted) are ignored."""
        wanted = set(call_ids)
        for call in sorted((c for c in self._calls.live if c.call_id in wanted),
                           key=lambda c: c.seq):
            self._scheduler.cancel(call, AgentFailure.of("cancelled", _LOST_RACE))

    def _replay_or_run(self, call: ChildCall, earlier: JournalEntry, *, valid: bool) -> None:
        """Answer ``call`` from the earlier run's entry if it passed the checks a live answer
        passes (schema, ``max_value_depth``, the shape of a text answer); else run it live."""
        journal = self._journal
        if journal is not None and journal.calls is not None:
            journal.calls.opened(call.request, earlier if valid else None)
        if not valid:
            logger.info("dsh-workflow: %s#%d: the journaled answer fails this call's checks "
                        "(another schema, or an altered journal); it runs live", self._id,
                        call.seq)
            self._scheduler.offer(call)
            return
        calls = self._calls
        assert calls.journaled
        call.replay = earlier
        calls.open(call)
        self.replayed += 1
        self._events.emit(AgentReplayed(run=self._info, seq=call.seq, label=call.request.label,
                                        phase=call.request.phase))
        calls.hold(call)

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
            self._fault(Fault("the script runtime sent a malformed workflow() call",
                              overrides=True))
            return
        runtime = self._calls.runtime
        assert runtime is not None
        if not self._calls.closed:
            runtime.settle(answer(call_id, {"name": found.name, "body": found.body,
                                            "args": args}))

    def _refuse(self, call_id: int, code: WorkflowErrorCode | str, message: str) -> None:
        runtime = self._calls.runtime
        assert runtime is not None
        runtime.settle(refusal(call_id, str(code), message))
        self._refused += 1
        limit = self._config.max_refused_calls
        if self._refused > limit:
            self._fault(Fault(
                f"{WorkflowErrorCode.RESOURCE_LIMIT.value}: the script kept calling agent() "
                f"after {limit} refused calls (max_refused_calls={limit}); the last refusal was "
                f"{code}: {message}", code=WorkflowErrorCode.RESOURCE_LIMIT))

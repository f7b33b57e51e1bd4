"""A run's questions (``ask()``, ``checkpoint()``): where each is checked, journaled, answered
and timed out, and when the run parks for want of an answerer (docs/scripts.md, "Asking a
person"; docs/durable-runs.md, "Runs that wait").

A question is one more journaled call: it takes the next seq (shared with ``agent()`` calls),
no agent slot, no token and no cap. Its answer comes from the first of: the earlier run's
journal (a resumed run: the n-th ask of a key takes the n-th answer), the engine's
``answers=`` provider, ``run.answer()``, the run store (another process: the viewer,
``dsh-workflow answer --no-continue``; picked up by the engine's control poll), or its
deadline. Every answer passes :func:`~dsh_workflow._questions.check_answer`; on a run with a
store it is committed (the store checks it again and refuses a question already answered)
before the script sees it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
from anyio.abc import TaskGroup

from ..._errors import WorkflowError, WorkflowErrorCode
from ..._events import EventHub, QuestionAnswered, QuestionAsked, RunInfo
from ..._questions import (
    ANSWERERS,
    AnswerProvider,
    AnswerReceipt,
    PendingQuestions,
    Question,
    QuestionKind,
    answer_schema,
    check_answer,
    parse_timeout,
    question_key,
)
from ..._store import QuestionRecord, RunStoreError
from ..script.wire import ScriptRuntime, answer, refusal
from .journal import RunJournal

__all__ = ["ASK_OPTIONS", "CHECKPOINT_OPTIONS", "MAX_QUESTIONS", "QuestionDesk", "QuestionOptions",
           "parse_question_options"]

logger = logging.getLogger("dsh_workflow.engine")

ASK_OPTIONS = ("schema", "choices", "multiple", "details", "default", "timeout", "onTimeout",
               "label", "phase")
CHECKPOINT_OPTIONS = ("details", "default", "timeout", "onReject")
ON_TIMEOUT = ("default", "null", "throw")
ON_REJECT = ("false", "throw")
_MAX_CHOICES = 100
#: Most questions one run may ask (each is a task, an event and a stored row): a script asking
#: in a runaway loop is stopped (RESOURCE_LIMIT), though questions count toward no agent cap.
MAX_QUESTIONS = 10_000
_MAX_TEXT = 10_000  # characters of details, a choice, a label


@dataclass(frozen=True)
class QuestionOptions:
    """The checked options of one ``ask()``/``checkpoint()`` call."""

    schema: dict[str, Any] | None = None  # the script's own schema (ask)
    choices: tuple[str, ...] | None = None
    multiple: bool = False
    details: str | None = None
    default: Any = None
    has_default: bool = False
    timeout_s: float | None = None
    on_timeout: str = "default"
    on_reject: str = "false"
    label: str | None = None
    phase: str | None = None


def _invalid(hook: str, text: str) -> WorkflowError:
    return WorkflowError(WorkflowErrorCode.INVALID_ARGUMENT, f"{hook}() {text}")


def _text_option(hook: str, name: str, value: object) -> str:
    if not isinstance(value, str) or len(value) > _MAX_TEXT:
        raise _invalid(hook, f"option {name} must be a string of at most {_MAX_TEXT} characters"
                             f" (got {type(value).__name__})")
    return value


def parse_question_options(kind: QuestionKind, raw: object) -> QuestionOptions:
    """The options of an ``ask()`` (``kind="ask"``) or ``checkpoint()`` call, checked as
    ``agent()``'s are: an unknown key is fatal ``UNSUPPORTED_OPTION`` listing the supported
    ones; a bad value fatal ``INVALID_ARGUMENT``. A schema's own check (and the default's
    check against the question) comes after, off the event loop."""
    hook = kind
    if raw is None:
        return QuestionOptions()
    if not isinstance(raw, dict):
        raise _invalid(hook, "options must be an object")
    allowed = ASK_OPTIONS if kind == "ask" else CHECKPOINT_OPTIONS
    for key in raw:
        if key not in allowed:
            raise WorkflowError(WorkflowErrorCode.UNSUPPORTED_OPTION, (
                f"{hook}() option {key!r} is not recognized (supported: {', '.join(allowed)})"))
    values: dict[str, Any] = {}
    schema = raw.get("schema")
    if schema is not None:
        if not isinstance(schema, dict):
            raise _invalid(hook, "option schema must be a JSON Schema object with root type "
                                 "\"object\", as agent()'s")
        values["schema"] = schema
    choices = raw.get("choices")
    if choices is not None:
        if not isinstance(choices, list) or not choices or len(choices) > _MAX_CHOICES \
                or not all(isinstance(c, str) and c and len(c) <= _MAX_TEXT for c in choices):
            raise _invalid(hook, f"option choices must be a list of 1 to {_MAX_CHOICES} "
                                 "non-empty strings")
        if len(set(choices)) != len(choices):
            raise _invalid(hook, "option choices lists a choice twice")
        if schema is not None:
            raise _invalid(hook, "takes schema or choices, not both")
        values["choices"] = tuple(choices)
    multiple = raw.get("multiple")
    if multiple is not None:
        if not isinstance(multiple, bool):
            raise _invalid(hook, "option multiple must be true or false")
        if multiple and choices is None:
            raise _invalid(hook, "option multiple needs choices")
        values["multiple"] = multiple
    for name in ("details", "label", "phase"):
        if raw.get(name) is not None:
            values[name] = _text_option(hook, name, raw[name])
    if "default" in raw:
        values["default"], values["has_default"] = raw["default"], True
    if raw.get("timeout") is not None:
        try:
            values["timeout_s"] = parse_timeout(raw["timeout"])
        except ValueError as exc:
            raise _invalid(hook, f"option {exc}") from None
    if raw.get("onTimeout") is not None:
        if raw["onTimeout"] not in ON_TIMEOUT:
            raise _invalid(hook, f"option onTimeout must be one of {', '.join(ON_TIMEOUT)} "
                                 f"(got {raw['onTimeout']!r})")
        values["on_timeout"] = raw["onTimeout"]
    if raw.get("onReject") is not None:
        if raw["onReject"] not in ON_REJECT:
            raise _invalid(hook, f"option onReject must be one of {', '.join(ON_REJECT)} "
                                 f"(got {raw['onReject']!r})")
        values["on_reject"] = raw["onReject"]
    return QuestionOptions(**values)


@dataclass(eq=False)
class _OpenQuestion:
    """One question the script waits on."""

    call_id: int
    question: Question
    key: str
    options: QuestionOptions
    registered: bool = False  # checked, recorded and announced: it can be answered
    thinking: bool = False  # the engine's answerer is working on it
    delivery: anyio.Event | None = None  # set once the answer on its way is delivered or failed
    closed: bool = False
    earlier: QuestionRecord | None = None  # the earlier run's (a resume), answered or not
    scopes: set[anyio.CancelScope] = field(default_factory=set)


class QuestionDesk:
    """One run's questions; see the module docstring. ``park(pending)`` parks the run (the
    host records the stop cause and stops); ``fault(error)`` ends the run for a script whose
    question was refused (the refusal itself is sent from here)."""

    def __init__(self, *, run_id: str, info: RunInfo, events: EventHub, task_group: TaskGroup,
                 runtime: Callable[[], ScriptRuntime | None], journal: RunJournal | None,
                 answers: AnswerProvider | None, park: bool,
                 on_park: Callable[[tuple[Question, ...]], None]) -> None:
        self._id = run_id
        self._info = info
        self._events = events
        self._tg = task_group
        self._runtime = runtime
        self._journal = journal
        self._answers = answers
        # who the provider is, in QuestionAnswered.by: its own ``answered_by`` when it names
        # one of the answerers (a terminal, an MCP client), else "answers"
        by = getattr(answers, "answered_by", None)
        self._answered_by = by if by in ANSWERERS else "answers"
        self._park = park
        self._on_park = on_park
        self._open: dict[str, _OpenQuestion] = {}
        self._asked = 0
        self._idle = False  # the script waits on nothing but questions
        self.closed = False
        #: Set while serving from a plain loop callback (no task to start tasks from): the
        #: tasks are owed, and :meth:`spawn_owed` starts them from the run's pump.
        self.deferring = False
        self.owed: list[tuple[_OpenQuestion, Callable[..., Any], tuple[Any, ...]]] = []

    # ---- the script asks ---------------------------------------------------------------------

    def ask(self, call_id: int, seq: int, kind: QuestionKind, text: str, raw: object,
            phase: str | None) -> None:
        """Serve one ``["ask", ...]`` message (on the loop, in call order): its qid and seq are
        given now; its checks that need a worker thread, its journal and its answerers follow
        in a task."""
        if self._asked >= MAX_QUESTIONS:
            self._refuse(call_id, WorkflowErrorCode.RESOURCE_LIMIT, (
                f"{kind}() refused: this run asked {MAX_QUESTIONS} questions, the most a run may "
                "ask — a backstop against a runaway loop"))
            return
        try:
            options = parse_question_options(kind, raw)
        except WorkflowError as exc:
            self._refuse(call_id, exc.code, exc.message)
            return
        self._asked += 1
        deadline = None if options.timeout_s is None else \
            datetime.now(UTC) + timedelta(seconds=options.timeout_s)
        question = Question(
            qid=f"q{self._asked}", seq=seq, kind=kind, question=text,
            schema=answer_schema(kind, options.schema, options.choices, options.multiple),
            choices=options.choices, multiple=options.multiple, details=options.details,
            default=options.default if options.has_default else
            (False if kind == "checkpoint" else None),
            has_default=options.has_default or kind == "checkpoint", deadline=deadline,
            label=options.label, phase=options.phase if options.phase is not None else phase)
        key = question_key(question)
        # taken here, in call order: the n-th ask of a key takes the earlier run's n-th answer
        earlier = self._journal.replay_question(key) if self._journal is not None else None
        if earlier is not None and earlier.question.deadline is not None:
            # a deadline is absolute: the continued run keeps the one first set
            question = replace(question, deadline=earlier.question.deadline)
        entry = _OpenQuestion(call_id=call_id, question=question, key=key, options=options,
                              earlier=earlier)
        self._open[question.qid] = entry
        self._idle = False
        self._start(entry, self._register, entry)

    def idle(self) -> None:
        """The script waits on nothing but its questions (an ``["idle", n]`` message)."""
        self._idle = True
        self._check_park()

    async def _register(self, entry: _OpenQuestion) -> None:
        question = entry.question
        if entry.options.schema is not None:
            from ..._schema import schema_violations

            problems = await anyio.to_thread.run_sync(schema_violations, entry.options.schema)
            if problems:
                self._close(entry)
                self._refuse(entry.call_id, WorkflowErrorCode.UNSUPPORTED_SCHEMA,
                             "ask() schema is not a supported JSON Schema — "
                             + "; ".join(problems))
                return
        if entry.options.has_default:
            try:
                await anyio.to_thread.run_sync(check_answer, question, question.default)
            except WorkflowError as exc:
                self._close(entry)
                self._refuse(entry.call_id, WorkflowErrorCode.INVALID_ARGUMENT,
                             f"{question.kind}() option default does not answer the question: "
                             f"{exc.message}")
                return
        journal, earlier = self._journal, entry.earlier
        if journal is not None:
            try:
                journal.post_question(question, entry.key)
            except RunStoreError as exc:
                logger.warning("dsh-workflow: %s: question %s not recorded: %s", self._id,
                               question.qid, exc)
        if earlier is not None and earlier.answered and earlier.by != "timeout":
            try:
                value = check_answer(question, earlier.answer)
            except WorkflowError:
                logger.info("dsh-workflow: %s: the journaled answer to %s fails its check; "
                            "it is asked again", self._id, question.qid)
            else:
                # not registered: it is answered already, so it is never pending
                entry.delivery = anyio.Event()
                await self._deliver(entry, value, earlier.by or "caller", None, replayed=True)
                return
        entry.registered = True
        self._events.emit(QuestionAsked(
            run=self._info, seq=question.seq, qid=question.qid, question=question.question,
            kind=question.kind, schema=question.schema, choices=question.choices,
            details=question.details, deadline=question.deadline))
        if question.deadline is not None:
            if question.deadline <= datetime.now(UTC):
                # past already (a continued run keeps the first deadline): time out now,
                # before the run could park on it
                await self._time_out(entry)
                return
            self._start(entry, self._time_out, entry)
        if self._answers is not None:
            entry.thinking = True
            self._start(entry, self._ask_answerer, entry)
        self._check_park()

    # ---- answers -----------------------------------------------------------------------------

    def pending(self) -> PendingQuestions:
        """The open questions that can be answered, in ask order (none once the run stopped:
        a parked run's are in its result)."""
        if self.closed:
            return PendingQuestions()
        return PendingQuestions(sorted(
            (e.question for e in self._open.values() if e.registered and not e.closed),
            key=lambda q: q.seq))

    def answer(self, qid: str, value: Any, by: str) -> AnswerReceipt:
        """Answer ``qid`` (checked now: raises ``INVALID_ARGUMENT``, the question staying
        open); the answer is delivered by a task (see :class:`AnswerReceipt`)."""
        entry = self._open.get(qid)
        if entry is None or not entry.registered or entry.closed or self.closed:
            open_ids = ", ".join(q.qid for q in self.pending()) or "none"
            raise WorkflowError(WorkflowErrorCode.INVALID_ARGUMENT,
                                f"run {self._id!r} has no open question {qid!r} (open: "
                                f"{open_ids})")
        if entry.delivery is not None:
            raise WorkflowError(WorkflowErrorCode.INVALID_ARGUMENT,
                                f"question {qid} of run {self._id!r} is being answered already")
        value = check_answer(entry.question, value)
        receipt = AnswerReceipt(entry.question)
        entry.delivery = anyio.Event()
        self._start(entry, self._deliver, entry, value, by, receipt)
        return receipt

    async def _ask_answerer(self, entry: _OpenQuestion) -> None:
        assert self._answers is not None
        try:
            value = await self._answers.answer(entry.question)
            value = check_answer(entry.question, value)
        except WorkflowError as exc:
            logger.warning("dsh-workflow: %s: the answer provider's answer to %s is invalid; "
                           "the question stays open: %s", self._id, entry.question.qid,
                           exc.message)
        except Exception:
            logger.exception("dsh-workflow: %s: the answer provider failed on %s; the question "
                             "stays open", self._id, entry.question.qid)
        else:
            if not entry.closed and entry.delivery is None:
                entry.thinking = False
                entry.delivery = anyio.Event()
                await self._deliver(entry, value, self._answered_by, None)
                return
        entry.thinking = False
        self._check_park()

    async def _deliver(self, entry: _OpenQuestion, value: Any, by: str, receipt: AnswerReceipt | None,
                       *, replayed: bool = False, stored: bool = False) -> None:
        """Commit (runs with a store) and hand ``value`` to the script; the caller has set
        ``entry.delivery`` (one delivery at a time), which is set and cleared here."""
        try:
            await self._commit_and_settle(entry, value, by, receipt, replayed=replayed,
                                          stored=stored)
        finally:
            delivery, entry.delivery = entry.delivery, None
            if delivery is not None:
                delivery.set()
        if not entry.closed:
            self._check_park()

    async def _commit_and_settle(self, entry: _OpenQuestion, value: Any, by: str,
                                 receipt: AnswerReceipt | None, *, replayed: bool,
                                 stored: bool) -> None:
        question = entry.question
        journal = self._journal
        if journal is not None and not stored:
            try:
                if by == "timeout":
                    await journal.store_time_out(question.qid, value)
                else:
                    await journal.store_answer(question.qid, value, by)
            except (WorkflowError, RunStoreError) as exc:
                # another answerer was first (the control poll delivers its answer), or the
                # store failed
                if receipt is not None:
                    receipt.deliver(exc)
                else:
                    logger.warning("dsh-workflow: %s: the answer to %s was not recorded: %s",
                                   self._id, question.qid, exc)
                return
        if entry.closed or self.closed:
            if receipt is not None:
                receipt.deliver(WorkflowError(WorkflowErrorCode.CANCELLED,
                                              f"run {self._id!r} ended before the answer to "
                                              f"{question.qid} reached it"))
            return
        self._close(entry)
        if not replayed:
            self._events.emit(QuestionAnswered(run=self._info, seq=question.seq,
                                               qid=question.qid, by=by))
        if question.kind == "checkpoint" and value is False and entry.options.on_reject == "throw":
            self._settle(refusal(entry.call_id, WorkflowErrorCode.CANCELLED.value,
                                 f"checkpoint {question.question!r} was rejected"))
        else:
            self._settle(answer(entry.call_id, value))
        if receipt is not None:
            receipt.deliver()

    async def _time_out(self, entry: _OpenQuestion) -> None:
        deadline = entry.question.deadline
        assert deadline is not None
        wait = (deadline - datetime.now(UTC)).total_seconds()
        if wait > 0:
            await anyio.sleep(wait)
        while entry.delivery is not None:  # an answer on its way wins (unless it fails)
            await entry.delivery.wait()
        if entry.closed or self.closed:
            return
        question, options = entry.question, entry.options
        if question.kind == "checkpoint" or options.on_timeout == "default":
            if options.has_default or question.kind == "checkpoint":
                entry.delivery = anyio.Event()
                await self._deliver(entry, question.default, "timeout", None)
                return
            why = f"ask({question.question!r}) timed out with no default to answer"
        elif options.on_timeout == "null":
            entry.delivery = anyio.Event()
            await self._deliver(entry, None, "timeout", None)
            return
        else:
            why = f"ask({question.question!r}) got no answer before its timeout"
        self._close(entry)
        self._events.emit(QuestionAnswered(run=self._info, seq=question.seq, qid=question.qid,
                                           by="timeout"))
        journal = self._journal
        if journal is not None:
            try:
                await journal.store_time_out(question.qid, None)
            except (WorkflowError, RunStoreError) as exc:
                logger.warning("dsh-workflow: %s: %s", self._id, exc)
        self._settle(refusal(entry.call_id, WorkflowErrorCode.TIMEOUT.value, why))

    async def poll(self) -> None:
        """Deliver the answers another process wrote to the store (the control poll calls
        this for runs with open questions)."""
        journal = self._journal
        if journal is None or self.closed:
            return
        waiting = {qid for qid, e in self._open.items()
                   if e.registered and not e.closed and e.delivery is None}
        if not waiting:
            return
        for record in await journal.stored_answers(waiting):
            entry = self._open.get(record.question.qid)
            if entry is None or entry.closed or entry.delivery is not None:
                continue
            try:
                value = check_answer(entry.question, record.answer) \
                    if record.by != "timeout" else record.answer
            except WorkflowError as exc:  # written by something that skipped the check
                logger.warning("dsh-workflow: %s: %s", self._id, exc.message)
                continue
            entry.delivery = anyio.Event()
            await self._deliver(entry, value, record.by or "command", None, stored=True)

    @property
    def waiting(self) -> bool:
        """True while a question is open (the control poll looks for answers then)."""
        return any(e.registered and not e.closed for e in self._open.values())

    # ---- parking and the end ----------------------------------------------------------------

    def _check_park(self) -> None:
        """Park the run when the script waits on nothing but questions that nobody is there
        to answer (``park=True``): no answerer thinking, no answer on its way, none still
        being registered."""
        if not self._park or not self._idle or self.closed:
            return
        live = [e for e in self._open.values() if not e.closed]
        if not live or any(e.thinking or e.delivery is not None or not e.registered
                           for e in live):
            return
        self._on_park(tuple(self.pending()))

    def close(self) -> None:
        """The run stops: every question's tasks are cancelled; nothing more is answered."""
        self.closed = True
        for entry in self._open.values():
            for scope in list(entry.scopes):
                scope.cancel()

    def _close(self, entry: _OpenQuestion) -> None:
        entry.closed = True
        self._idle = False  # the script gets an answer (or a refusal): it runs again

    def _settle(self, reply: list[Any]) -> None:
        runtime = self._runtime()
        if runtime is not None and not self.closed:
            runtime.settle(reply)

    def _refuse(self, call_id: int, code: WorkflowErrorCode | str, message: str) -> None:
        self._idle = False
        self._settle(refusal(call_id, str(code), message))

    def spawn_owed(self) -> None:
        """Start the tasks owed since :attr:`deferring` serving (from a task)."""
        owed, self.owed = self.owed, []
        for entry, func, args in owed:
            self._start(entry, func, *args)

    def _start(self, entry: _OpenQuestion, func: Callable[..., Any], *args: Any) -> None:
        if self.closed:
            return
        if self.deferring:
            self.owed.append((entry, func, args))
            return

        async def guarded() -> None:
            with anyio.CancelScope() as scope:
                entry.scopes.add(scope)
                try:
                    await func(*args)
                except Exception:
                    logger.exception("dsh-workflow: %s: question %s failed inside the engine",
                                     self._id, entry.question.qid)
                finally:
                    entry.scopes.discard(scope)

        self._tg.start_soon(guarded, name=f"dsh-workflow question {self._id}")

"""One run's durable record: its row in the run store, its journal, and replay from an earlier run.

A :class:`RunJournal` exists only for runs of an engine given a store (docs/durable-runs.md). The host calls
it at four points: :meth:`begin` before the script starts (the run is recorded; a resumed run's
earlier journal is loaded), :meth:`replay` when an ``agent()`` call arrives, :meth:`commit`
before a child's value reaches the script, and :meth:`finish` once the result is settled.

Replay is content-addressed: a call's :func:`call_key` hashes what decides its answer (prompt,
schema, model, route, effort, agent definition, isolation and the identity of the provider that
answers it), never its label or phase. The n-th call with a key takes the earlier run's n-th
completed entry with that key, in the earlier run's call order.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import time
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

import anyio
import anyio.to_thread
from pydantic import BaseModel

from ..._events import SPARSE_FIELDS
from ..._provider_options import provider_options
from ..._questions import Question
from ..._store import JournalEntry, RunRecord, RunStore, RunStoreError
from ..._store.liveness import still_running
from ..._store.owners import HOST
from ..._store.questions import QuestionRecord
from ..._store.signing import signed
from ..._subagent import SubagentRequest, Usage
from .calls import CallLog
from .chain import chain_entries, chain_questions

__all__ = ["EngineStore", "EventRecorder", "RunJournal", "call_key", "check_resume"]

logger = logging.getLogger("dsh_workflow.engine")

#: Runs of this process that have begun and not yet settled, as ``(store path, run id)``: a
#: resume of one of them is refused (its calls are still running). A settled run is resumable
#: at once, even while its end is still being written (its record says ``running`` until then).
_UNSETTLED: set[tuple[str, str]] = set()

#: Most ``Date``/``Math.random`` values of one kind a run journals (the runtime stops recording
#: after as many; later values are live). Bounds what a script can make the store hold.
MAX_RECORDED_NUMBERS = 100_000


def _field(text: str | None) -> str:
    """One key field, unambiguous whatever it holds: ``~`` for None, else ``<length>:<text>``."""
    return "~" if text is None else f"{len(text)}:{text}"


def call_key(request: SubagentRequest, identity: str) -> str:
    """The journal key of one ``agent()`` call: hex SHA-256 over what decides its answer, each
    field length-prefixed; the schema as canonical JSON (key order does not matter)."""
    agent = request.agent
    schema = None if request.schema is None else json.dumps(
        request.schema, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    definition = None if agent is None else json.dumps(
        [agent.name, agent.system_prompt, agent.model,
         None if agent.tools is None else list(agent.tools)], ensure_ascii=False)
    material = "".join(map(_field, (identity, request.model, request.provider, request.effort,
                                    request.agent_type, request.isolation, definition, schema,
                                    request.prompt)))
    return hashlib.sha256(material.encode("utf-8", "surrogatepass")).hexdigest()


class RunJournal:
    """One run's view of a :class:`RunStore` (see the module docstring).

    Every method raises only :class:`RunStoreError` (a failing store); the host turns that into
    the run's error. Nothing here blocks the event loop.
    """

    def __init__(self, store: RunStore, run_id: str, *, meta: Mapping[str, Any], script: str,
                 args: Any, resumed_from: str | None, identity: str,
                 provider: object = None, rerun: frozenset[int] = frozenset(),
                 model_aliases: Mapping[str, str] | None = None) -> None:
        self.store = store
        self.run_id = run_id
        self.identity = identity
        self._meta = dict(meta)
        self._script = script
        self._args = args
        self.resumed_from = resumed_from
        self._replays: dict[str, deque[JournalEntry]] = {}
        # the earlier run's questions by key, in its ask order (answered or not)
        self._questions: dict[str, deque[QuestionRecord]] = {}
        # "race": first()'s winners by ordinal (None where a race recorded none)
        self._numbers: dict[str, list[float | None]] = {"clock": [], "random": [], "race": []}
        self._early_events: list[Mapping[str, Any]] | None = []  # posted before begin()
        self.began = False
        #: Seqs of the earlier run whose answers are not replayed (they run live again).
        self.rerun = rerun
        post_calls = getattr(store, "post_calls", None)
        #: What each call was asked and answered (stores that keep calls), else None.
        self.calls = None if post_calls is None else CallLog(post_calls, run_id, provider)
        self._provider_options = None if provider is None else provider_options(provider)
        if self._provider_options is not None and model_aliases:
            # aliases decide a call's model, so its key: a resume needs them as much
            self._provider_options["model_aliases"] = dict(model_aliases)

    async def begin(self) -> None:
        """Record the run as ``running``; for a resumed run, load the earlier journal (with
        what the runs it resumed in turn journaled and it did not: :mod:`.chain`)."""
        if self.resumed_from is not None:
            for entry in await chain_entries(self.store, self.resumed_from):
                if entry.kind == "agent":
                    self._replays.setdefault(entry.key, deque()).append(entry)
                elif entry.kind == "race" and entry.number is not None:
                    races = self._numbers["race"]
                    if entry.seq <= MAX_RECORDED_NUMBERS:
                        races.extend([None] * (entry.seq - len(races)))
                        races[entry.seq - 1] = entry.number
                elif entry.number is not None:
                    self._numbers[entry.kind].append(entry.number)
            for asked in await chain_questions(self.store, self.resumed_from):
                self._questions.setdefault(asked.key, deque()).append(asked)
        _UNSETTLED.add((self.store.path, self.run_id))
        try:
            await self.store.create_run(self.run_id, meta=self._meta, script=self._script,
                                        args=self._args, resumed_from=self.resumed_from)
        except BaseException:
            self.settled()
            raise
        self.began = True
        post_provider = getattr(self.store, "post_provider", None)
        if post_provider is not None and self._provider_options is not None:
            # signed, so a resume trusts only what this user recorded (the key file is read
            # or made off the event loop)
            record = await anyio.to_thread.run_sync(signed, self.run_id, self._provider_options)
            post_provider(self.run_id, record)
        early, self._early_events = self._early_events, None
        if early:
            self.store.post_events(self.run_id, early)

    def settled(self) -> None:
        """The run's result is settled: it no longer runs calls (idempotent)."""
        _UNSETTLED.discard((self.store.path, self.run_id))

    def numbers_text(self) -> str:
        """The recorded clock and random values and race winners, as the runtime's replay
        input (JSON)."""
        return json.dumps(self._numbers, allow_nan=False)

    def replay(self, key: str) -> JournalEntry | None:
        """The earlier run's next completed entry for ``key`` (consumed), or None; None too
        when that entry is the earlier run's call of a seq to :attr:`rerun`."""
        waiting = self._replays.get(key)
        if not waiting:
            return None
        entry = waiting.popleft()
        rerun = entry.run_id == self.resumed_from and entry.seq in self.rerun
        return None if rerun else entry

    def replay_question(self, key: str) -> QuestionRecord | None:
        """The earlier run's next question with ``key`` (consumed; answered or not: an open
        one gives its deadline), or None."""
        waiting = self._questions.get(key)
        return waiting.popleft() if waiting else None

    def post_question(self, question: Question, key: str) -> None:
        """Queue the row of a question this run asked (stores that keep questions)."""
        post = getattr(self.store, "post_question", None)
        if post is not None:
            post(self.run_id, question, key)

    async def store_answer(self, qid: str, value: Any, by: str) -> None:
        """Commit the answer to ``qid`` (checked again by the store; ``WorkflowError`` when
        another answerer was first)."""
        commit = getattr(self.store, "answer_question", None)
        if commit is not None:
            await commit(self.run_id, qid, value, by=by)

    async def store_time_out(self, qid: str, value: Any) -> None:
        """Commit that ``qid`` timed out, with the value the script got."""
        commit = getattr(self.store, "time_out_question", None)
        if commit is not None:
            await commit(self.run_id, qid, value)

    async def stored_answers(self, qids: set[str]) -> list[QuestionRecord]:
        """The answers the store holds for ``qids`` (written by another process)."""
        read = getattr(self.store, "question_records", None)
        if read is None:
            return []
        records: list[QuestionRecord] = await read(self.run_id)
        return [r for r in records if r.answered and r.question.qid in qids]

    def entry(self, seq: int, key: str, *, text: str | None, structured: Any,
              usage: Usage | None) -> JournalEntry:
        """This run's journal entry for call ``seq``."""
        return JournalEntry(run_id=self.run_id, seq=seq, key=key, text=text,
                            structured=structured, usage=usage)

    async def commit(self, entries: Sequence[JournalEntry]) -> None:
        """Return once ``entries`` survive ``kill -9`` (concurrent callers share a commit)."""
        await self.store.commit_journal(entries)

    def post_numbers(self, kind: str, first: int, values: Sequence[float]) -> None:
        """Journal clock or random values the script received, or a ``first()`` winner
        (``race``: ``first`` is the race's ordinal) (queued; committed, in order, no later than
        the next :meth:`commit`)."""
        end = min(first + len(values), MAX_RECORDED_NUMBERS + 1)
        if kind not in self._numbers or first < 1 or first >= end:
            return
        self.store.post_journal([
            JournalEntry(run_id=self.run_id, seq=seq, kind=kind,
                         number=float(values[seq - first]))
            for seq in range(first, end)])

    def post_event(self, event: Mapping[str, Any]) -> None:
        """Queue one event (JSON data) for the run's stored event log (held back until the run
        is recorded)."""
        if self._early_events is not None:
            self._early_events.append(event)
        else:
            self.store.post_events(self.run_id, [event])

    async def finish(self, status: str, result: Mapping[str, Any], *, agents: int,
                     replayed: int, usage: Usage, failed: int = 0) -> RunRecord:
        """Record the run's end (``completed``, ``error`` or ``cancelled``) and its result."""
        if self.calls is not None:
            self.calls.close()
        return await self.store.finish_run(self.run_id, status=status,  # type: ignore[arg-type]  # an end state, by the caller
                                           result=result, agents=agents, replayed=replayed,
                                           usage=usage, ended_at=time.time(),
                                           agents_failed=failed)


def check_resume(store: RunStore | None, resume_from: object) -> str | None:
    """The run to resume, checked at start: it must be a run of ``store`` that is no longer
    ``running`` (a live owner would still be running its calls). Raises ``ValueError`` with the
    reason otherwise (the caller makes it ``INVALID_ARGUMENT``)."""
    if resume_from is None:
        return None
    if not isinstance(resume_from, str) or not resume_from:
        raise ValueError(f"resume_from must be a run id (got {resume_from!r})")
    if store is None:
        raise ValueError("resume_from needs an engine with a run store (store=...); this engine "
                         "records no runs")
    try:
        found = store.get_run_sync(resume_from)
    except RunStoreError as exc:
        raise ValueError(f"resume_from {resume_from!r} cannot be read: {exc}") from None
    if found is None:
        raise ValueError(f"resume_from {resume_from!r} is not a run of the store {store.path}")
    if found.status == "running" and (
            (store.path, resume_from) in _UNSETTLED or not _ours(found)):
        # Its process still runs its calls: a resume would run the unfinished ones a second time.
        raise ValueError(still_running(found))
    return resume_from


def _ours(record: RunRecord) -> bool:
    """Whether ``record`` was made by this process (then :data:`_UNSETTLED` knows if it runs)."""
    return record.owner_pid == os.getpid() and record.owner_host == HOST


class EventRecorder:
    """An engine's event listener that files each run's events in that run's journal, as
    ``{"event": <class name>, ...fields}`` without the repeated ``run`` identity."""

    def __init__(self) -> None:
        self.journals: dict[str, RunJournal] = {}

    def __call__(self, event: BaseModel) -> None:
        journal = self.journals.get(event.run.id)  # type: ignore[attr-defined]  # every workflow event carries its run
        if journal is not None:
            # The fields as they are (nested models such as Usage are encoded by the store).
            record: dict[str, Any] = {
                key: value for key, value in event.__dict__.items()
                if key != "run" and (value is not None or key not in SPARSE_FIELDS)}
            kind = record["event"] = type(event).__name__
            journal.post_event(record)
            if journal.calls is not None:
                journal.calls.on_event(event, kind)


class EngineStore:
    """What an engine given ``store=`` does with it, written once for every engine: open it on
    entering, file every run's events, and on exit commit what is queued and close it if the
    engine was the one that opened it (a store the caller opened stays open for the caller)."""

    def __init__(self, store: object) -> None:
        needed = ("open", "aclose", "create_run", "commit_journal", "get_run_sync")
        if not all(callable(getattr(store, name, None)) for name in needed):
            raise TypeError("store must be a RunStore (for example SQLiteRunStore(path))")
        self.store: RunStore = store  # type: ignore[assignment]  # duck-checked as a RunStore just above
        self.recorder = EventRecorder()
        self._opened_here = False

    async def enter(self) -> None:
        self._opened_here = not getattr(self.store, "is_open", False)
        await self.store.open()

    async def exit(self) -> None:
        try:
            await self.store.flush()
        except RunStoreError as exc:
            logger.error(  # noqa: TRY400 - the message names the cause; a traceback is noise
                "dsh-workflow: the run store could not commit the last events: %s", exc)
        finally:
            if self._opened_here:
                await self.store.aclose()

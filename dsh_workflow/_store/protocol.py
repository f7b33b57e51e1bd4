"""The persistence seam of durable runs: what an engine needs from a run store."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel

from .._questions import Question
from .._subagent import Usage
from .calls import CallBrief, CallRecord, CallRow
from .models import (
    FinalStatus,
    JournalEntry,
    JournalKind,
    RunRecord,
    RunStatus,
    StoredEvent,
)
from .questions import QuestionRecord

__all__ = ["QuestionStore", "RunControlStore", "RunStore"]


@runtime_checkable
class RunStore(Protocol):
    """Where runs, their events and their journals are kept.

    Every method that touches storage is async and never blocks the event loop, except
    :meth:`get_run_sync` (a short bounded read for start-time checks) and the ``post_*`` methods
    (which only queue). Every failure of the storage itself surfaces as ``RunStoreError``, and
    every wait is bounded. Writes are applied in the order they were made (queued or awaited),
    so a write that returned implies every earlier ``post_*`` is durable too.

    Lifecycle: ``async with store:`` (or :meth:`open` / :meth:`aclose`). A store that is open
    owns the runs it creates; when its process dies, those runs read ``interrupted``.
    """

    @property
    def path(self) -> str: ...

    async def open(self) -> None:
        """Create or upgrade the file and start the writer; idempotent."""

    async def aclose(self) -> None:
        """Commit everything queued, stop the writer and release ownership; idempotent."""

    async def create_run(self, run_id: str, *, meta: Mapping[str, Any], script: str,
                         args: Any = None, resumed_from: str | None = None,
                         created_at: float | None = None) -> RunRecord:
        """Record a new ``running`` run owned by this store; returns it once committed.

        ``resumed_from`` must name a run of this store.
        """

    def post_events(self, run_id: str, events: Sequence[Mapping[str, Any] | BaseModel]) -> None:
        """Queue events (JSON objects: mappings or pydantic models) for the run, in order;
        returns at once. Call it on the event loop thread.

        A failure is logged and raised by the next :meth:`flush`.
        """

    async def append_events(self, run_id: str,
                            events: Sequence[Mapping[str, Any] | BaseModel]) -> None:
        """Like :meth:`post_events`, but returns once they are committed."""

    def post_journal(self, entries: Sequence[JournalEntry]) -> None:
        """Queue journal entries; returns at once (for values whose loss is harmless)."""

    async def commit_journal(self, entries: Sequence[JournalEntry]) -> None:
        """Return only once ``entries`` are committed (they survive ``kill -9``).

        Concurrent callers share transactions (group commit).
        """

    async def flush(self) -> None:
        """Return once everything queued before the call is committed; raises the first
        failure of a queued write since the last flush."""

    async def finish_run(self, run_id: str, *, status: FinalStatus,
                         result: Mapping[str, Any] | None = None, agents: int = 0,
                         replayed: int = 0, usage: Usage | None = None,
                         ended_at: float | None = None, agents_failed: int = 0) -> RunRecord:
        """End a ``running`` run with its final status and result (``agents_failed``: its
        children that did not complete); returns it once committed."""

    async def get_run(self, run_id: str) -> RunRecord | None:
        """The run, or None; a ``running`` run whose owner died reads ``interrupted``."""

    def get_run_sync(self, run_id: str) -> RunRecord | None:
        """:meth:`get_run` on the calling thread (a bounded primary-key read)."""

    async def list_runs(self, *, limit: int | None = None,
                        status: RunStatus | None = None) -> list[RunRecord]:
        """Runs newest first (optionally only those with ``status``)."""

    async def events(self, run_id: str, *, after: int = 0,
                     limit: int | None = None) -> list[StoredEvent]:
        """The run's committed events with ``seq > after``, in order."""

    async def journal(self, run_id: str, *, kind: JournalKind | None = None) -> list[JournalEntry]:
        """The run's committed journal entries in ``(seq, kind)`` order."""


@runtime_checkable
class RunControlStore(RunStore, Protocol):
    """A :class:`RunStore` that also keeps what each ``agent()`` call was asked and answered
    and serves runs under control from other processes (docs/durable-runs.md, "Runs under control");
    ``SQLiteRunStore`` is one. An engine uses these methods when its store has them, and works
    without them otherwise (nothing of the kind is then recorded or polled).
    """

    def post_calls(self, rows: Sequence[CallRow]) -> None:
        """Queue ``calls`` rows; a row replaces an earlier one of the same ``(run_id, seq)``."""

    def post_provider(self, run_id: str, options: Mapping[str, Any]) -> None:
        """Queue the run's provider options (secret-free JSON data)."""

    async def calls(self, run_id: str, *, after: int = 0,
                    limit: int | None = None) -> list[CallRecord]:
        """The run's calls with ``seq > after``, in seq order."""

    async def call(self, run_id: str, seq: int) -> CallRecord | None:
        """One call of the run, or None."""

    async def call_briefs(self, run_id: str) -> list[CallBrief]:
        """Every call of the run without its texts (seq, model it ran on, outcome, failure)."""

    async def provider(self, run_id: str) -> dict[str, Any] | None:
        """The run's recorded provider options, or None."""

    async def request_cancel(self, run_id: str, origin: str | None = None) -> bool:
        """Ask the owner of the ``running`` run to cancel it (``origin``: where the request
        comes from, such as ``viewer``); False when it is not running."""

    async def cancel_origin(self, run_id: str) -> str | None:
        """Where the cancel request of ``run_id`` came from (None: not said, or none)."""

    async def cancel_requests(self, run_ids: Sequence[str]) -> list[str]:
        """Which of ``run_ids`` another process asked to cancel."""


@runtime_checkable
class QuestionStore(RunStore, Protocol):
    """A :class:`RunStore` that keeps the questions runs ask (``ask()``, ``checkpoint()``) and
    their answers, durable and shared between processes (docs/durable-runs.md, "Runs that
    wait"); ``SQLiteRunStore`` is one. Without these methods an engine keeps questions in
    memory only: a resume asks them again, and no other process can answer them.
    """

    def post_question(self, run_id: str, question: Question, key: str) -> None:
        """Queue the row of an asked (open) question."""

    async def questions(self, run_id: str, *, open_only: bool = True) -> list[Question]:
        """The run's questions in seq order: the open ones (default), or all of them."""

    async def question_records(self, run_id: str, *,
                               open_only: bool = False) -> list[QuestionRecord]:
        """The run's questions with their keys and answers, in seq order."""

    async def answer_question(self, run_id: str, qid: str, value: Any, *,
                              by: str) -> Question:
        """Answer an open question once committed; ``WorkflowError`` ``INVALID_ARGUMENT`` for
        an invalid value or an unknown or answered qid (nothing written)."""

    async def time_out_question(self, run_id: str, qid: str, value: Any) -> Question:
        """Close an open question as timed out (``by="timeout"``) with the script's value."""

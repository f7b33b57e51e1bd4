"""``SQLiteRunStore``: the embedded run store, one SQLite file in WAL mode.

The facade that composes the store's parts: the file (``connection.py``), the writer thread
(``writer.py``) fed with the rows of ``writes.py``, the read connections and queries
(``reads.py``), and the owners' liveness (``liveness.py``). It holds the store's lifecycle,
which event loop it answers on, and the writes of the current loop iteration.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, Self, TypeVar

import anyio
import anyio.to_thread
import sniffio

from .._errors import WorkflowError
from .._loop import LoopHandle
from .._questions import Question
from .._subagent import Usage
from . import owners, reads, writes
from .calls import CallBrief, CallRecord, CallRow
from .calls import cancel_origin as _cancel_origin
from .calls import cancel_requested as _cancel_requested
from .calls import insert_calls as _insert_calls
from .calls import read_briefs as _read_briefs
from .calls import read_call as _read_call
from .calls import read_calls as _read_calls
from .calls import read_provider as _read_provider
from .calls import request_cancel as _request_cancel
from .calls import write_provider as _write_provider
from .connection import StoreFile
from .encoding import bound as _bound
from .encoding import count as _count
from .encoding import dumps as _dumps
from .encoding import untext as _untext
from .liveness import Liveness
from .models import (
    FinalStatus,
    JournalEntry,
    JournalKind,
    RunRecord,
    RunStatus,
    RunStoreError,
    StoredEvent,
)
from .owners import HOST, OwnerLock
from .questions import QuestionRecord, answer_row, insert_question, read_questions
from .reads import Readers, naming
from .writer import Waiter, Writer
from .writes import Event, EventRows, Tick, journal_rows

__all__ = ["SQLiteRunStore"]

logger = logging.getLogger("dsh_workflow.store")

T = TypeVar("T")
Synchronous = Literal["NORMAL", "FULL"]


class SQLiteRunStore:
    """The embedded :class:`RunStore`: one SQLite file (stdlib ``sqlite3``) in WAL mode.

    ``path`` is the database file (created if missing; its folder must exist); beside it SQLite
    keeps ``<path>-wal`` and ``<path>-shm``, and the store keeps ``<path>-owners/`` (one lock
    file per process that owns running runs; beside the real file when ``path`` is a symlink, so
    every way to reach one file shares its owners). All of them are owner-only (``0o600`` files, a
    ``0o700`` folder) whatever the umask: see ``files.py``. Several processes on one machine may use
    the same file at once; network file systems are not supported (their locks are unreliable),
    and the platform must have POSIX ``flock`` (Linux, macOS).

    Durability: with ``synchronous="NORMAL"`` (the default) a committed write survives the death
    of the process (``kill -9``) but the last commits may be lost on power loss or an OS crash;
    ``synchronous="FULL"`` syncs the log to disk on every commit, so commits survive power loss
    too, at the price of one ``fsync`` per transaction (concurrent commits still share one).

    Bounds: a write waits at most ``busy_timeout_s`` for another process's write lock, and every
    call waits at most ``timeout_s`` for its answer; past either it raises
    :class:`RunStoreError`, as it does for a read-only, full, corrupt or foreign file.

    Threads: all writes run on one writer thread per store (started by the first write or
    :meth:`open`, ended by :meth:`aclose`); reads run on anyio worker threads with their own
    connections. Use ``async with SQLiteRunStore(path) as store:`` so the thread and the
    ownership of its runs end with the block.
    """

    def __init__(self, path: str | os.PathLike[str], *, synchronous: Synchronous = "NORMAL",
                 busy_timeout_s: float = 5.0, timeout_s: float = 30.0) -> None:
        if not owners.SUPPORTED:  # pragma: no cover - POSIX only
            raise RunStoreError(os.fspath(path), "the run store needs POSIX file locks (flock)")
        if synchronous not in ("NORMAL", "FULL"):
            raise ValueError(f"synchronous must be 'NORMAL' or 'FULL', not {synchronous!r}")
        if not busy_timeout_s > 0 or not timeout_s > 0:
            raise ValueError("busy_timeout_s and timeout_s must be positive")
        self._path = os.path.abspath(os.fspath(path))
        self._synchronous = synchronous
        self._busy_timeout_s = float(busy_timeout_s)
        self._timeout_s = float(timeout_s)
        # The owner locks and the liveness checks key on the file's real path, so a store opened
        # through a symlink sees the same owners as one opened directly (a live run never reads
        # ``interrupted`` for want of its lock file).
        real = os.path.realpath(self._path)
        self._owner = OwnerLock(real)
        self._file = StoreFile(self._path, synchronous=synchronous,
                               busy_timeout_s=self._busy_timeout_s)
        self._events = EventRows()
        self._writer = Writer(self._path, connect=self._file.connect,
                              on_connect=self._file.prepare, on_begin=self._file.check,
                              on_rollback=self._events.forget, on_error=self._deferred_failure,
                              bulk={"events": self._events.insert,
                                    "journal": writes.insert_journal,
                                    "calls": _insert_calls},
                              busy_timeout_s=self._busy_timeout_s, timeout_s=self._timeout_s)
        self._readers = Readers(self._path, self._file.connect,
                                busy_timeout_s=self._busy_timeout_s, timeout_s=self._timeout_s)
        self._liveness = Liveness(real, self._owner, self._mark_interrupted)
        self._deferred: RunStoreError | None = None
        self._handle: tuple[object, LoopHandle] | None = None
        self._open_tick: Tick | None = None
        self._opened = False
        self._closed = False

    # ---- lifecycle --------------------------------------------------------------------------

    @property
    def path(self) -> str:
        """The database file (absolute)."""
        return self._path

    @property
    def synchronous(self) -> Synchronous:
        return self._synchronous

    @property
    def transactions(self) -> int:
        """Write transactions this store has committed (group commit makes it far smaller than
        the number of writes)."""
        return self._writer.transactions

    async def __aenter__(self) -> Self:
        try:
            await self.open()
        except BaseException:
            await self.aclose()
            raise
        return self

    @property
    def is_open(self) -> bool:
        """True between :meth:`open` and :meth:`aclose`."""
        return self._opened and not self._closed

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def open(self) -> None:
        """Create or upgrade the file and start the writer thread; idempotent."""
        if not self._opened:
            await self._write(_noop)
            self._opened = True

    async def aclose(self) -> None:
        """Commit everything queued, end the writer thread, close every connection and release
        ownership (runs still ``running`` then read ``interrupted``). Idempotent; bounded by
        ``timeout_s``. A queued write that failed was already logged; it is not raised here."""
        if self._closed:
            return
        self._closed = True
        self._readers.close()
        try:
            self._seal()
            waiter = Waiter(self._loop_handle())
            if self._writer.stop(waiter):
                with anyio.move_on_after(self._timeout_s):
                    await waiter.event.wait()
            for thread in self._writer.threads:
                await anyio.to_thread.run_sync(thread.join, self._timeout_s)
                if thread.is_alive():
                    logger.warning("run store %s: the %s thread did not end within %g s",
                                   self._path, thread.name, self._timeout_s)
        finally:
            self._owner.release()

    # ---- writes ------------------------------------------------------------------------------

    async def create_run(self, run_id: str, *, meta: Mapping[str, Any], script: str,
                         args: Any = None, resumed_from: str | None = None,
                         created_at: float | None = None) -> RunRecord:
        """Record a new ``running`` run owned by this store; returns it once committed.

        Raises :class:`RunStoreError` when ``run_id`` is taken or ``resumed_from`` names no run
        of this store.
        """
        record = RunRecord(id=run_id, meta=dict(meta), script=script, args=args,
                           created_at=time.time() if created_at is None else created_at,
                           resumed_from=resumed_from, owner_pid=os.getpid(), owner_host=HOST)
        row = writes.new_run_row(record, args, self._owner.token)

        def job(conn: sqlite3.Connection) -> RunRecord:
            self._owner.acquire()
            writes.insert_run(conn, self._path, row)
            return record

        return await self._write(job)

    def post_events(self, run_id: str, events: Sequence[Event]) -> None:
        """Queue ``events`` for the run, in order, and return at once. Call it on the event loop.

        An event is a JSON object: a mapping, or a pydantic model (stored as its JSON dump by
        field name; passing the model saves building a dict first). Each gets the next ``seq``
        of the run (1-based) and the time of this call. Raises ``TypeError`` at once for data
        that is not JSON; a storage failure is logged and raised by the next :meth:`flush`.
        """
        self._tick().events.append(writes.events_payload(run_id, events))

    async def append_events(self, run_id: str, events: Sequence[Event]) -> None:
        """Like :meth:`post_events`, but returns once the events are committed."""
        tick = self._tick()
        tick.events.append(writes.events_payload(run_id, events))
        await self._wait(tick.waiter_for_events())

    def post_journal(self, entries: Sequence[JournalEntry]) -> None:
        """Queue journal entries and return at once (a storage failure: see :meth:`post_events`).

        Meant for values that need not be durable before use (``clock``/``random``); since
        writes commit in order, they are durable once any later write has returned.
        """
        self._tick().journal.extend(journal_rows(entries))

    async def commit_journal(self, entries: Sequence[JournalEntry]) -> None:
        """Return only once ``entries`` are committed: they survive ``kill -9`` (and power loss
        with ``synchronous="FULL"``). Entries of concurrent callers share one transaction.

        Raises :class:`RunStoreError` when an entry's ``(run_id, kind, seq)`` is already
        journaled or its run is unknown. If the caller is cancelled while waiting, the entries
        may still be committed.
        """
        tick = self._tick()
        tick.journal.extend(journal_rows(entries))
        await self._wait(tick.waiter_for_journal())

    async def flush(self) -> None:
        """Return once every write queued before this call is committed.

        Raises the first failure of a queued (``post_*``) write since the last flush.
        """
        await self._write(_noop)
        error, self._deferred = self._deferred, None
        if error is not None:
            raise RunStoreError(error.path, error.reason)

    async def finish_run(self, run_id: str, *, status: FinalStatus,
                         result: Mapping[str, Any] | None = None, agents: int = 0,
                         replayed: int = 0, usage: Usage | None = None,
                         ended_at: float | None = None, agents_failed: int = 0) -> RunRecord:
        """End a ``running`` run: its final status, result (the ``WorkflowResult`` as JSON data)
        and counts (``agents_failed``: children that did not complete). Returns the stored
        record once committed. Counts past SQLite's integer range (a provider may report any
        token count) are stored as ``2**63 - 1``, here and in the journal; the result keeps
        them as given.

        Raises :class:`RunStoreError` when the run is unknown or no longer ``running``.
        """
        if status not in writes.FINAL:
            raise ValueError(f"a run finishes as one of {sorted(writes.FINAL)}, not {status!r}")
        if agents < 0 or replayed < 0 or agents_failed < 0:
            raise ValueError("agents, replayed and agents_failed must not be negative")
        usage = usage or Usage()
        values = (status, None if result is None else _dumps(dict(result)),
                  time.time() if ended_at is None else ended_at, _count(agents),
                  _count(replayed), _count(usage.input_tokens), _count(usage.output_tokens),
                  _count(agents_failed), usage.cost_usd, run_id)

        def job(conn: sqlite3.Connection) -> RunRecord:
            record = writes.end_run(conn, self._path, run_id, values)
            self._events.forget_run(run_id)
            return record

        return await self._write(job)

    # ---- reads -------------------------------------------------------------------------------

    async def get_run(self, run_id: str) -> RunRecord | None:
        """The run, or None. A ``running`` run whose owner process died reads ``interrupted``
        (and is marked so in the file). A run whose row cannot be read whole (corrupt, or
        written by something else) raises :class:`RunStoreError` naming it and what is wrong."""
        await self.open()
        return await self._readers.read(lambda conn: reads.get_run(conn, self._path, run_id,
                                                                  self._liveness))

    def get_run_sync(self, run_id: str) -> RunRecord | None:
        """:meth:`get_run` on the calling thread: one primary-key read (WAL readers do not wait
        for writers), for checks that must be synchronous. The store must be open."""
        if not self._opened:
            raise RunStoreError(self._path, "the store is not open (use 'async with' or "
                                            "'await store.open()' first)")
        return self._readers.read_sync(
            lambda conn: reads.get_run(conn, self._path, run_id, self._liveness))

    async def list_runs(self, *, limit: int | None = None,
                        status: RunStatus | None = None) -> list[RunRecord]:
        """Runs newest first (by ``created_at``, then creation order), at most ``limit``,
        optionally only those whose (liveness-checked) status is ``status``.

        A row that cannot be read whole is listed as a ``broken`` record (its ``problem`` says
        what is wrong) instead of failing the listing."""
        await self.open()

        return await self._readers.read(lambda conn: reads.list_runs(
            conn, self._liveness, limit=limit, status=status))

    async def events(self, run_id: str, *, after: int = 0,
                     limit: int | None = None) -> list[StoredEvent]:
        """The run's committed events with ``seq > after``, in order (at most ``limit``).

        Stored events that cannot be read raise :class:`RunStoreError` naming the run."""
        await self.open()

        return await self._readers.read(lambda conn: reads.events(
            conn, self._path, run_id, after=after, limit=limit))

    async def journal(self, run_id: str, *,
                      kind: JournalKind | None = None) -> list[JournalEntry]:
        """The run's committed journal entries ordered by ``seq`` (then kind), optionally only
        those of one ``kind``. An entry that cannot be read raises :class:`RunStoreError`
        naming the run and the entry."""
        await self.open()

        return await self._readers.read(lambda conn: reads.journal(
            conn, self._path, run_id, kind=kind))

    # ---- calls and run control (docs/durable-runs.md, "Runs under control") -----------------

    def post_calls(self, rows: Sequence[CallRow]) -> None:
        """Queue ``calls`` rows (what a call was asked and answered) and return at once; a row
        replaces an earlier one of the same ``(run_id, seq)``. Written in batches like events
        (a storage failure: see :meth:`post_events`)."""
        self._tick().calls.extend(rows)

    def post_provider(self, run_id: str, options: Mapping[str, Any]) -> None:
        """Queue the run's provider options (JSON data free of secrets: the caller's duty)."""
        text = _dumps(dict(options))
        self._seal()  # after whatever was posted before it
        self._writer.submit(lambda conn: _write_provider(conn, run_id, _untext(text)))

    async def calls(self, run_id: str, *, after: int = 0,
                    limit: int | None = None) -> list[CallRecord]:
        """The run's committed calls with ``seq > after``, in seq order (at most ``limit``).
        A call record that cannot be read raises :class:`RunStoreError` naming the run."""
        await self.open()
        bounded = None if limit is None else _bound(limit)
        return await self._readers.read(lambda conn: naming(
            self._path, run_id, lambda: _read_calls(conn, run_id, after=_bound(after),
                                                    limit=bounded)))

    async def call_briefs(self, run_id: str) -> list[CallBrief]:
        """Every call of the run without its texts: seq, the model it ran on, outcome, failure
        (bounded work for an overview, however long the prompts and answers are)."""
        await self.open()
        return await self._readers.read(lambda conn: _read_briefs(conn, run_id))

    async def call(self, run_id: str, seq: int) -> CallRecord | None:
        """Call ``seq`` of the run, or None (a record that cannot be read: see :meth:`calls`)."""
        await self.open()
        return await self._readers.read(lambda conn: naming(
            self._path, run_id, lambda: _read_call(conn, run_id, _bound(seq))))

    async def provider(self, run_id: str) -> dict[str, Any] | None:
        """The provider options the run was recorded with, or None."""
        await self.open()
        return await self._readers.read(lambda conn: _read_provider(conn, run_id))

    async def request_cancel(self, run_id: str, origin: str | None = None) -> bool:
        """Ask the process that owns the ``running`` run to cancel it (it polls for this);
        ``origin`` says where the request comes from (``viewer``, ``command line``: the run's
        reason becomes ``cancelled from the <origin>``). Returns once the request is
        committed; False when the run is not running (or its owner is gone: then it reads
        ``interrupted``)."""
        record = await self.get_run(run_id)
        if record is None or record.status != "running":
            return False
        at = time.time()
        return await self._write(lambda conn: _request_cancel(conn, run_id, at, origin))

    async def cancel_origin(self, run_id: str) -> str | None:
        """Where the cancel request of ``run_id`` came from (None: not said, or none)."""
        await self.open()
        return await self._readers.read(lambda conn: _cancel_origin(conn, run_id))

    async def cancel_requests(self, run_ids: Sequence[str]) -> list[str]:
        """Which of ``run_ids`` another process asked to cancel (:meth:`request_cancel`)."""
        if not run_ids:
            return []
        await self.open()
        ids = list(run_ids)
        return await self._readers.read(lambda conn: _cancel_requested(conn, ids))

    # ---- questions (docs/durable-runs.md, "Runs that wait") --------------------------------

    def post_question(self, run_id: str, question: Question, key: str) -> None:
        """Queue the row of a question the run asked (open), and return at once; a question
        already recorded stays as it is (a storage failure: see :meth:`post_events`)."""
        at = time.time()
        self._seal()  # after whatever was posted before it
        self._writer.submit(lambda conn: insert_question(conn, run_id, question, key, at))

    async def questions(self, run_id: str, *, open_only: bool = True) -> list[Question]:
        """The run's questions in seq order: the open ones (default), or all of them."""
        return [record.question
                for record in await self.question_records(run_id, open_only=open_only)]

    async def question_records(self, run_id: str, *,
                               open_only: bool = False) -> list[QuestionRecord]:
        """The run's questions with their keys and answers, in seq order."""
        await self.open()
        return await self._readers.read(lambda conn: naming(
            self._path, run_id, lambda: read_questions(conn, run_id, open_only=open_only)))

    async def answer_question(self, run_id: str, qid: str, value: Any, *,
                              by: str) -> Question:
        """Answer the open question ``qid`` of ``run_id`` (``by``: who answers — ``viewer``,
        ``command``, ``mcp``, ...); returns the question once the answer is committed (it
        survives ``kill -9``). The value is checked by
        :func:`~dsh_workflow._questions.check_answer` first. Raises
        :class:`~dsh_workflow.WorkflowError` ``INVALID_ARGUMENT`` for an invalid value, an
        unknown qid or one already answered (nothing is written then), and
        :class:`RunStoreError` when the store fails. The process running the run (if one is)
        applies the answer within half a second; a parked run gets it when it is continued."""
        return await self._answer(run_id, qid, value, by=by, validate=True)

    async def time_out_question(self, run_id: str, qid: str, value: Any) -> Question:
        """Close the open question ``qid`` as timed out with the value the script got
        (``by="timeout"``; not checked: a timeout's null). Raises as :meth:`answer_question`
        does for an unknown or answered qid."""
        return await self._answer(run_id, qid, value, by="timeout", validate=False)

    async def _answer(self, run_id: str, qid: str, value: Any, *, by: str,
                      validate: bool) -> Question:
        def job(conn: sqlite3.Connection) -> Question | WorkflowError:
            # A refusal is the job's result, not its failure: the writer would make any
            # exception a RunStoreError.
            try:
                return answer_row(conn, run_id, qid, value, by=by, validate=validate)
            except WorkflowError as exc:
                return exc

        outcome = await self._write(job)
        if isinstance(outcome, WorkflowError):
            raise outcome
        return outcome

    # ---- internals ---------------------------------------------------------------------------

    def _deferred_failure(self, error: RunStoreError) -> None:
        if self._deferred is None:
            logger.warning("run store %s: a queued write failed: %s", self._path, error.reason)
            self._deferred = error

    def _loop_handle(self) -> LoopHandle:
        try:
            library = sniffio.current_async_library()
        except sniffio.AsyncLibraryNotFoundError:
            # A plain loop callback (an engine's runtime report) has no async context: it runs
            # on the loop the store was last used from.
            if self._handle is None:
                raise RunStoreError(self._path, "the store was used outside any event loop") \
                    from None
            return self._handle[1]
        if library == "trio":
            import trio

            key: object = trio.lowlevel.current_trio_token()
        else:
            import asyncio

            key = asyncio.get_running_loop()
        cached = self._handle
        if cached is None or cached[0] is not key:
            cached = self._handle = (key, LoopHandle())
        return cached[1]

    def _tick(self) -> Tick:
        """The bulk writes of the current loop iteration, handed to the writer as one when the
        loop gets round to the callback posted here (or earlier, by the next other write)."""
        tick = self._open_tick
        if tick is None:
            if self._closed:
                raise RunStoreError(self._path, "the store is closed")
            handle = self._loop_handle()
            tick = self._open_tick = Tick(handle)
            handle.post(self._seal, tick)
        return tick

    def _seal(self, tick: Tick | None = None) -> None:
        """Submit the open tick's writes (if ``tick`` is given: only if it is still open)."""
        open_tick = self._open_tick
        if open_tick is None or (tick is not None and tick is not open_tick):
            return
        self._open_tick = None
        try:
            if open_tick.events:
                self._writer.submit_bulk("events", open_tick.events, open_tick.events_waiter)
        except RunStoreError as exc:
            self._fail_unqueued(open_tick.events_waiter, exc)
        try:
            if open_tick.journal:
                self._writer.submit_bulk("journal", open_tick.journal, open_tick.journal_waiter)
        except RunStoreError as exc:
            self._fail_unqueued(open_tick.journal_waiter, exc)
        try:
            if open_tick.calls:
                self._writer.submit_bulk("calls", open_tick.calls)
        except RunStoreError as exc:
            self._deferred_failure(exc)

    def _fail_unqueued(self, waiter: Waiter | None, error: RunStoreError) -> None:
        if waiter is not None:
            waiter.fail_now(error)
        else:
            self._deferred_failure(error)

    async def _write(self, job: Callable[[sqlite3.Connection], T]) -> T:
        self._seal()  # whatever was posted before this write goes before it
        waiter = Waiter(self._loop_handle())
        self._writer.submit(job, waiter)
        return await self._wait(waiter)  # type: ignore[no-any-return]  # the job's result, a T

    async def _wait(self, waiter: Waiter) -> Any:
        # No cancel scope per caller: the writer's watchdog bounds every wait (cheaper when a
        # thousand callers share one waiter).
        await waiter.event.wait()
        if waiter.error is not None:
            raise RunStoreError(waiter.error.path, waiter.error.reason)
        return waiter.result

    def _mark_interrupted(self, owner: str, now: float) -> None:
        """Mark the runs of a dead owner ``interrupted`` by a quiet queued write."""
        try:
            self._writer.submit(lambda conn: writes.mark_interrupted(conn, owner, now),
                                quiet=True)
        except RunStoreError:
            pass  # closed: the next reader marks it


def _noop(conn: sqlite3.Connection) -> None:
    return None

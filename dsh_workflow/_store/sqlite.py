"""``SQLiteRunStore``: the embedded run store, one SQLite file in WAL mode."""

from __future__ import annotations

import json
import logging
import math
import os
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, Self, TypeVar

import anyio
import anyio.to_thread
import sniffio
from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticSerializationError, to_json

from .._loop import LoopHandle
from .._result import with_error_code
from .._subagent import Usage
from . import owners
from .bulk import insert_rows
from .calls import CallBrief, CallRecord, CallRow
from .calls import cancel_requested as _cancel_requested
from .calls import insert_calls as _insert_calls
from .calls import read_briefs as _read_briefs
from .calls import read_call as _read_call
from .calls import read_calls as _read_calls
from .calls import read_provider as _read_provider
from .calls import request_cancel as _request_cancel
from .calls import write_provider as _write_provider
from .files import prepare_database
from .models import (
    FinalStatus,
    JournalEntry,
    JournalKind,
    RunRecord,
    RunStatus,
    RunStoreError,
    StoredEvent,
)
from .owners import HOST, OwnerLock, owner_alive
from .schema import connect, migrate, store_error
from .writer import Waiter, Writer

__all__ = ["SQLiteRunStore"]

logger = logging.getLogger("dsh_workflow.store")

T = TypeVar("T")
Event = Mapping[str, Any] | BaseModel
Synchronous = Literal["NORMAL", "FULL"]

_FINAL: frozenset[str] = frozenset({"completed", "error", "cancelled"})
_RUN_COLUMNS = ("id, meta, script, args, created_at, ended_at, status, result, resumed_from, "
                "owner, owner_pid, owner_host, agents, replayed, input_tokens, output_tokens, "
                "agents_failed, cost_usd")
_EVENT_COLUMNS = ("run_id", "first_seq", "last_seq", "data")
_JOURNAL_COLUMNS = ("run_id", "kind", "seq", "key", "text", "structured", "number",
                    "input_tokens", "output_tokens", "cost_usd", "cache_read_tokens",
                    "cache_write_tokens")
_READ_POOL = 4
_MAX_INTEGER = 2**63 - 1  # SQLite's INTEGER is 64-bit signed


def _bound(value: int) -> int:
    """An integer query parameter within SQLite's range (any ``after`` or ``limit`` a caller
    passes reads as the nearest value SQLite can compare with, instead of raising)."""
    return max(-_MAX_INTEGER, min(int(value), _MAX_INTEGER))


def _count(value: int) -> int:
    """A token count as SQLite can hold it: a provider may report any size, and a count past
    SQLite's range would fail the write (and with it the run's journal); it is clamped."""
    return value if value <= _MAX_INTEGER else _MAX_INTEGER

_encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


def _text(value: str) -> str | bytes:
    """A string as SQLite can hold it. A lone surrogate (which JSON text from a script may
    carry) is not UTF-8, so such a string is kept as its ``surrogatepass`` bytes instead."""
    if value.isascii():
        return value
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return value.encode("utf-8", "surrogatepass")
    return value


def _untext(value: str | bytes) -> str:
    return value.decode("utf-8", "surrogatepass") if isinstance(value, bytes) else value


def _dumps(value: Any) -> str | bytes:
    """JSON text of ``value``. pydantic-core's encoder is several times faster than the stdlib
    one (this is on the hot path: every event and journal entry); the stdlib one takes over for
    what it refuses (lone surrogates) and raises ``TypeError`` for what is not JSON data."""
    try:
        return to_json(value).decode()
    except PydanticSerializationError:
        return _text(_encode(value))


def _loads(value: str | bytes) -> Any:
    return json.loads(_untext(value))


class SQLiteRunStore:
    """The embedded :class:`RunStore`: one SQLite file (stdlib ``sqlite3``) in WAL mode.

    ``path`` is the database file (created if missing; its folder must exist); beside it SQLite
    keeps ``<path>-wal`` and ``<path>-shm``, and the store keeps ``<path>-owners/`` (one lock
    file per process that owns running runs). All of them are owner-only (``0o600`` files, a
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
        self._owner = OwnerLock(self._path)
        self._writer = Writer(self._path, connect=self._connect, on_connect=self._prepare,
                              on_begin=self._check_file,
                              on_rollback=self._forget_writes, on_error=self._deferred_failure,
                              bulk={"events": self._insert_events,
                                    "journal": self._insert_journal,
                                    "calls": _insert_calls},
                              busy_timeout_s=self._busy_timeout_s, timeout_s=self._timeout_s)
        self._readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        self._event_seq: dict[str, int] = {}  # writer thread only: last event seq per run
        self._file_id: tuple[int, int] | None = None  # writer thread only: (st_dev, st_ino)
        self._file_ready = False  # the file was made owner-only (files.prepare_database)
        self._dead_owners: set[str] = set()
        self._deferred: RunStoreError | None = None
        self._handle: tuple[object, LoopHandle] | None = None
        self._open_tick: _Tick | None = None
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
            with self._readers_lock:
                readers, self._readers = self._readers, []
            for conn in readers:
                conn.close()
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
        row = (record.id, _dumps(record.meta), _text(record.script),
               None if args is None else _dumps(args), record.created_at, resumed_from,
               self._owner.token, record.owner_pid, record.owner_host)

        def job(conn: sqlite3.Connection) -> RunRecord:
            self._owner.acquire()
            if conn.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone():
                raise RunStoreError(self._path, f"a run with id {run_id!r} already exists")
            if resumed_from is not None and not conn.execute(
                    "SELECT 1 FROM runs WHERE id = ?", (resumed_from,)).fetchone():
                raise RunStoreError(self._path, f"resumed_from {resumed_from!r}: no such run")
            conn.execute("INSERT INTO runs (id, meta, script, args, created_at, status, "
                         "resumed_from, owner, owner_pid, owner_host) "
                         "VALUES (?, ?, ?, ?, ?, 'running', ?, ?, ?, ?)", row)
            return record

        return await self._write(job)

    def post_events(self, run_id: str, events: Sequence[Event]) -> None:
        """Queue ``events`` for the run, in order, and return at once. Call it on the event loop.

        An event is a JSON object: a mapping, or a pydantic model (stored as its JSON dump by
        field name; passing the model saves building a dict first). Each gets the next ``seq``
        of the run (1-based) and the time of this call. Raises ``TypeError`` at once for data
        that is not JSON; a storage failure is logged and raised by the next :meth:`flush`.
        """
        self._tick().events.append(self._events_payload(run_id, events))

    async def append_events(self, run_id: str, events: Sequence[Event]) -> None:
        """Like :meth:`post_events`, but returns once the events are committed."""
        tick = self._tick()
        tick.events.append(self._events_payload(run_id, events))
        await self._wait(tick.waiter_for_events())

    def post_journal(self, entries: Sequence[JournalEntry]) -> None:
        """Queue journal entries and return at once (a storage failure: see :meth:`post_events`).

        Meant for values that need not be durable before use (``clock``/``random``); since
        writes commit in order, they are durable once any later write has returned.
        """
        self._tick().journal.extend(_journal_rows(entries))

    async def commit_journal(self, entries: Sequence[JournalEntry]) -> None:
        """Return only once ``entries`` are committed: they survive ``kill -9`` (and power loss
        with ``synchronous="FULL"``). Entries of concurrent callers share one transaction.

        Raises :class:`RunStoreError` when an entry's ``(run_id, kind, seq)`` is already
        journaled or its run is unknown. If the caller is cancelled while waiting, the entries
        may still be committed.
        """
        tick = self._tick()
        tick.journal.extend(_journal_rows(entries))
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
        if status not in _FINAL:
            raise ValueError(f"a run finishes as one of {sorted(_FINAL)}, not {status!r}")
        if agents < 0 or replayed < 0 or agents_failed < 0:
            raise ValueError("agents, replayed and agents_failed must not be negative")
        usage = usage or Usage()
        values = (status, None if result is None else _dumps(dict(result)),
                  time.time() if ended_at is None else ended_at, _count(agents),
                  _count(replayed), _count(usage.input_tokens), _count(usage.output_tokens),
                  _count(agents_failed), usage.cost_usd, run_id)

        def job(conn: sqlite3.Connection) -> RunRecord:
            cursor = conn.execute("UPDATE runs SET status = ?, result = ?, ended_at = ?, "
                                  "agents = ?, replayed = ?, input_tokens = ?, output_tokens = ?, "
                                  "agents_failed = ?, cost_usd = ? "
                                  "WHERE id = ? AND status = 'running'", values)
            row = conn.execute(f"SELECT {_RUN_COLUMNS} FROM runs WHERE id = ?",
                               (run_id,)).fetchone()
            if row is None:
                raise RunStoreError(self._path, f"no such run: {run_id!r}")
            if cursor.rowcount == 0:
                raise RunStoreError(self._path, f"run {run_id!r} is not running (it is "
                                                f"{row[6]})")
            self._event_seq.pop(run_id, None)
            return _record(row)

        return await self._write(job)

    # ---- reads -------------------------------------------------------------------------------

    async def get_run(self, run_id: str) -> RunRecord | None:
        """The run, or None. A ``running`` run whose owner process died reads ``interrupted``
        (and is marked so in the file). A run whose row cannot be read whole (corrupt, or
        written by something else) raises :class:`RunStoreError` naming it and what is wrong."""
        await self.open()
        return await self._read_async(lambda conn: self._get_run(conn, run_id))

    def get_run_sync(self, run_id: str) -> RunRecord | None:
        """:meth:`get_run` on the calling thread: one primary-key read (WAL readers do not wait
        for writers), for checks that must be synchronous. The store must be open."""
        if not self._opened:
            raise RunStoreError(self._path, "the store is not open (use 'async with' or "
                                            "'await store.open()' first)")
        return self._read(lambda conn: self._get_run(conn, run_id))

    async def list_runs(self, *, limit: int | None = None,
                        status: RunStatus | None = None) -> list[RunRecord]:
        """Runs newest first (by ``created_at``, then creation order), at most ``limit``,
        optionally only those whose (liveness-checked) status is ``status``.

        A row that cannot be read whole is listed as a ``broken`` record (its ``problem`` says
        what is wrong) instead of failing the listing."""
        await self.open()

        def read(conn: sqlite3.Connection) -> list[RunRecord]:
            sql = f"SELECT {_RUN_COLUMNS} FROM runs"
            params: tuple[Any, ...] = ()
            if status == "broken":
                pass  # any row may turn out broken: each is read
            elif status in ("running", "interrupted"):
                sql += " WHERE status IN ('running', 'interrupted')"
            elif status is not None:
                sql += " WHERE status = ?"
                params = (status,)
            sql += " ORDER BY created_at DESC, n DESC"
            if limit is not None and status not in ("running", "interrupted", "broken"):
                sql += " LIMIT ?"
                params += (_bound(limit),)
            records = self._reconcile(conn.execute(sql, params).fetchall())
            if status is not None:
                records = [record for record in records if record.status == status]
            return records if limit is None else records[:limit]

        return await self._read_async(read)

    async def events(self, run_id: str, *, after: int = 0,
                     limit: int | None = None) -> list[StoredEvent]:
        """The run's committed events with ``seq > after``, in order (at most ``limit``).

        Stored events that cannot be read raise :class:`RunStoreError` naming the run."""
        await self.open()

        def read(conn: sqlite3.Connection) -> list[StoredEvent]:
            found: list[StoredEvent] = []
            rows = conn.execute("SELECT first_seq, data FROM events WHERE run_id = ? "
                                "AND last_seq > ? ORDER BY first_seq", (run_id, _bound(after)))
            for first_seq, data in rows:
                try:
                    pairs = _event_pairs(first_seq, data)
                except _BadRow as exc:
                    raise RunStoreError(self._path, f"run {run_id!r} is broken: {exc}") \
                        from None
                for seq, at, event in pairs:
                    if seq <= after:
                        continue
                    if limit is not None and len(found) >= limit:
                        return found
                    found.append(StoredEvent(run_id=run_id, seq=seq, at=at, data=event))
            return found

        return await self._read_async(read)

    async def journal(self, run_id: str, *,
                      kind: JournalKind | None = None) -> list[JournalEntry]:
        """The run's committed journal entries ordered by ``seq`` (then kind), optionally only
        those of one ``kind``. An entry that cannot be read raises :class:`RunStoreError`
        naming the run and the entry."""
        await self.open()

        def read(conn: sqlite3.Connection) -> list[JournalEntry]:
            sql = ("SELECT kind, seq, key, text, structured, number, input_tokens, output_tokens, "
                   "cost_usd, cache_read_tokens, cache_write_tokens FROM journal WHERE run_id = ?")
            params: tuple[Any, ...] = (run_id,)
            if kind is not None:
                sql += " AND kind = ?"
                params += (kind,)
            rows = conn.execute(sql + " ORDER BY seq, kind", params).fetchall()
            try:
                return [_journal_entry(run_id, row) for row in rows]
            except _BadRow as exc:
                raise RunStoreError(self._path, f"run {run_id!r} has a broken journal: {exc}") \
                    from None

        return await self._read_async(read)

    # ---- calls and run control (README, "Runs under control") -------------------------------

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
        return await self._read_async(lambda conn: _naming(
            self._path, run_id, lambda: _read_calls(conn, run_id, after=_bound(after),
                                                    limit=bounded)))

    async def call_briefs(self, run_id: str) -> list[CallBrief]:
        """Every call of the run without its texts: seq, the model it ran on, outcome, failure
        (bounded work for an overview, however long the prompts and answers are)."""
        await self.open()
        return await self._read_async(lambda conn: _read_briefs(conn, run_id))

    async def call(self, run_id: str, seq: int) -> CallRecord | None:
        """Call ``seq`` of the run, or None (a record that cannot be read: see :meth:`calls`)."""
        await self.open()
        return await self._read_async(lambda conn: _naming(
            self._path, run_id, lambda: _read_call(conn, run_id, _bound(seq))))

    async def provider(self, run_id: str) -> dict[str, Any] | None:
        """The provider options the run was recorded with, or None."""
        await self.open()
        return await self._read_async(lambda conn: _read_provider(conn, run_id))

    async def request_cancel(self, run_id: str) -> bool:
        """Ask the process that owns the ``running`` run to cancel it (it polls for this);
        returns once the request is committed; False when the run is not running (or its
        owner is gone: then it reads ``interrupted``)."""
        record = await self.get_run(run_id)
        if record is None or record.status != "running":
            return False
        at = time.time()
        return await self._write(lambda conn: _request_cancel(conn, run_id, at))

    async def cancel_requests(self, run_ids: Sequence[str]) -> list[str]:
        """Which of ``run_ids`` another process asked to cancel (:meth:`request_cancel`)."""
        if not run_ids:
            return []
        await self.open()
        ids = list(run_ids)
        return await self._read_async(lambda conn: _cancel_requested(conn, ids))

    # ---- internals ---------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        if not self._file_ready:
            # Before SQLite first opens it: a new file (and so its -wal and -shm) owner-only.
            prepare_database(self._path)
            self._file_ready = True
        return connect(self._path, synchronous=self._synchronous,
                       busy_timeout_s=self._busy_timeout_s)

    def _prepare(self, conn: sqlite3.Connection) -> None:
        migrate(conn, self._path)
        info = os.stat(self._path)
        self._file_id = (info.st_dev, info.st_ino)

    def _check_file(self, conn: sqlite3.Connection) -> None:
        """Before each write transaction: the file at the path is still the one the writer
        opened. SQLite does not notice a file replaced (renamed over, or removed) under an open
        connection: it would go on committing to the unlinked old file, and every commit would
        be lost. One ``stat`` per (group-committed) transaction does. Only the path is looked
        at: opening and closing the database file here would drop SQLite's POSIX locks, which
        belong to the whole process."""
        try:
            info = os.stat(self._path)
        except FileNotFoundError:
            raise RunStoreError(self._path, "the database file was removed while the store "
                                            "was open") from None
        if (info.st_dev, info.st_ino) != self._file_id:
            raise RunStoreError(self._path, "the database file was replaced by another file "
                                            "while the store was open")

    def _forget_writes(self) -> None:
        self._event_seq.clear()

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

    def _tick(self) -> _Tick:
        """The bulk writes of the current loop iteration, handed to the writer as one when the
        loop gets round to the callback posted here (or earlier, by the next other write)."""
        tick = self._open_tick
        if tick is None:
            if self._closed:
                raise RunStoreError(self._path, "the store is closed")
            handle = self._loop_handle()
            tick = self._open_tick = _Tick(handle)
            handle.post(self._seal, tick)
        return tick

    def _seal(self, tick: _Tick | None = None) -> None:
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

    @staticmethod
    def _events_payload(run_id: str, events: Sequence[Event]
                        ) -> tuple[str, float, list[str | bytes]]:
        for event in events:
            # a plain dict first: the common case, and isinstance against an ABC costs ~1 µs
            if type(event) is not dict and not isinstance(event, Mapping | BaseModel):
                raise TypeError(f"an event is a mapping or a pydantic model, not "
                                f"{type(event).__name__}")
        return run_id, time.time(), [_dumps(event) for event in events]

    def _insert_events(self, conn: sqlite3.Connection,
                       ticks: list[list[tuple[str, float, list[str | bytes]]]]) -> None:
        # One row per run per transaction: a JSON array of [at, event] pairs.
        pairs: dict[str, list[str]] = {}
        for run_id, at, data in (payload for tick in ticks for payload in tick):
            stamp = repr(at)
            pairs.setdefault(run_id, []).extend(
                f"[{stamp},{text if isinstance(text, str) else _untext(text)}]" for text in data)
        rows: list[tuple[str, int, int, str | bytes]] = []
        for run_id, items in pairs.items():
            if not items:
                continue
            last = self._event_seq.get(run_id)
            if last is None:
                last = conn.execute("SELECT coalesce(max(last_seq), 0) FROM events "
                                    "WHERE run_id = ?", (run_id,)).fetchone()[0]
            rows.append((run_id, last + 1, last + len(items), _text("[" + ",".join(items) + "]")))
            self._event_seq[run_id] = last + len(items)
        insert_rows(conn, "events", _EVENT_COLUMNS, rows)

    @staticmethod
    def _insert_journal(conn: sqlite3.Connection, ticks: list[list[tuple[Any, ...]]]) -> None:
        insert_rows(conn, "journal", _JOURNAL_COLUMNS,
                    ticks[0] if len(ticks) == 1 else [row for tick in ticks for row in tick])

    def _get_run(self, conn: sqlite3.Connection, run_id: str) -> RunRecord | None:
        row = conn.execute(f"SELECT {_RUN_COLUMNS} FROM runs WHERE id = ?", (run_id,)).fetchone()
        if row is None:
            return None
        record = self._reconcile([row])[0]
        if record.problem is not None:
            raise RunStoreError(self._path, f"run {run_id!r} is broken: {record.problem}")
        return record

    def _reconcile(self, rows: list[tuple[Any, ...]]) -> list[RunRecord]:
        """Records from rows, with ``running`` runs of dead owners read as ``interrupted``; each
        dead owner found is marked in the file by a quiet queued write."""
        now = time.time()
        found_dead: list[str] = []
        records = []
        for row in rows:
            record = _record(row)
            owner = row[9]
            if record.status == "running" and isinstance(owner, str) and self._owner_dead(
                    owner, record.owner_host):
                if owner not in found_dead:
                    found_dead.append(owner)
                record = record.model_copy(update={"status": "interrupted", "ended_at": now})
            records.append(record)
        for owner in found_dead:
            self._mark_interrupted(owner, now)
        return records

    def _owner_dead(self, owner: str, host: str | None) -> bool:
        if owner in self._dead_owners:
            return True
        if owner == self._owner.token and self._owner.held:
            return False
        if host != HOST:
            return False  # another machine's process: its liveness cannot be seen from here
        if owner_alive(self._path, owner):
            return False
        self._dead_owners.add(owner)
        return True

    def _mark_interrupted(self, owner: str, now: float) -> None:
        def job(conn: sqlite3.Connection) -> None:
            conn.execute("UPDATE runs SET status = 'interrupted', ended_at = ? "
                         "WHERE owner = ? AND status = 'running'", (now, owner))

        try:
            self._writer.submit(job, quiet=True)
        except RunStoreError:
            pass  # closed: the next reader marks it

    async def _read_async(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        with anyio.move_on_after(self._timeout_s) as scope:
            return await anyio.to_thread.run_sync(self._read, fn, abandon_on_cancel=True)
        assert scope.cancelled_caught
        raise RunStoreError(self._path, f"a read got no answer within {self._timeout_s:g} s")

    def _read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        if self._closed:
            raise RunStoreError(self._path, "the store is closed")
        with self._readers_lock:
            conn = self._readers.pop() if self._readers else None
        keep = False
        try:
            if conn is None:
                conn = self._connect()
            result = fn(conn)
            keep = True
            return result
        except RunStoreError:
            keep = True
            raise
        except (sqlite3.Error, OSError) as exc:
            raise store_error(self._path, exc, busy_timeout_s=self._busy_timeout_s) from exc
        except Exception as exc:  # a row nothing above foresaw: still the store's error
            keep = True
            raise RunStoreError(self._path, f"the read failed ({type(exc).__name__}: "
                                            f"{_short(exc)}); is a row corrupt?") from exc
        finally:
            if conn is not None:
                with self._readers_lock:
                    if keep and len(self._readers) < _READ_POOL and not self._closed:
                        self._readers.append(conn)
                        conn = None
                if conn is not None:
                    conn.close()


class _Tick:
    """Bulk writes made in one loop iteration: they go to the writer as one item per kind, and
    the callers that wait for them share one waiter per kind."""

    __slots__ = ("calls", "events", "events_waiter", "handle", "journal", "journal_waiter")

    def __init__(self, handle: LoopHandle) -> None:
        self.handle = handle
        self.events: list[tuple[str, float, list[str | bytes]]] = []
        self.journal: list[tuple[Any, ...]] = []
        self.calls: list[CallRow] = []
        self.events_waiter: Waiter | None = None
        self.journal_waiter: Waiter | None = None

    def waiter_for_events(self) -> Waiter:
        if self.events_waiter is None:
            self.events_waiter = Waiter(self.handle)
        return self.events_waiter

    def waiter_for_journal(self) -> Waiter:
        if self.journal_waiter is None:
            self.journal_waiter = Waiter(self.handle)
        return self.journal_waiter


def _journal_rows(entries: Sequence[JournalEntry]) -> list[tuple[Any, ...]]:
    return [(e.run_id, e.kind, e.seq, e.key, None if e.text is None else _text(e.text),
             None if e.structured is None else _dumps(e.structured), e.number,
             None if e.usage is None else _count(e.usage.input_tokens),
             None if e.usage is None else _count(e.usage.output_tokens),
             None if e.usage is None else e.usage.cost_usd,
             None if e.usage is None or not e.usage.cache_read_tokens
             else _count(e.usage.cache_read_tokens),
             None if e.usage is None or not e.usage.cache_write_tokens
             else _count(e.usage.cache_write_tokens)) for e in entries]


def _event_pairs(first_seq: Any, data: Any) -> list[tuple[int, float, dict[str, Any]]]:
    """``(seq, at, event)`` of one ``events`` row (a JSON array of ``[at, event]`` pairs)."""
    if type(first_seq) is not int:
        raise _BadRow(f"an events row starts at {first_seq!r}, not at a whole number")
    loaded = _column_json(f"events from seq {first_seq}", data)
    if not isinstance(loaded, list):
        raise _BadRow(f"its events from seq {first_seq} are not a JSON array")
    pairs = []
    for seq, pair in enumerate(loaded, first_seq):
        if not (isinstance(pair, list) and len(pair) == 2
                and isinstance(pair[0], int | float) and not isinstance(pair[0], bool)
                and isinstance(pair[1], dict)):
            raise _BadRow(f"its event {seq} is not a [time, object] pair")
        pairs.append((seq, float(pair[0]), pair[1]))
    return pairs


def _journal_entry(run_id: str, row: tuple[Any, ...]) -> JournalEntry:
    kind, seq, key, text, structured, number, tin, tout, cost, cread, cwrite = row
    try:
        return JournalEntry(
            run_id=run_id, kind=kind, seq=seq, key=key,
            text=None if text is None else _column_text(f"journal entry {seq} text", text),
            structured=None if structured is None
            else _column_json(f"journal entry {kind} {seq}", structured),
            number=number,
            usage=None if tin is None else Usage(
                input_tokens=tin, output_tokens=tout or 0, cost_usd=cost,
                cache_read_tokens=cread or 0, cache_write_tokens=cwrite or 0))
    except ValidationError as exc:
        raise _BadRow(f"journal entry {kind} {seq}: {_invalid(exc)}") from None


def _naming(path: str, run_id: str, read: Callable[[], T]) -> T:
    """``read()``, with a stored call record that cannot be read (corrupt JSON, wrong types)
    reported as a :class:`RunStoreError` naming the run."""
    try:
        return read()
    except (ValueError, TypeError, RecursionError) as exc:  # ValidationError is a ValueError
        raise RunStoreError(path, f"run {run_id!r} has a broken call record: "
                                  f"{type(exc).__name__}: {_short(exc)}") from None


def _noop(conn: sqlite3.Connection) -> None:
    return None


def _stored_result(data: Any) -> Any:
    """A stored result as loaded: a row written before results carried ``error_code`` gets
    the code derived from its text (:func:`~dsh_workflow._result.with_error_code`)."""
    return with_error_code(data) if isinstance(data, dict) else data


class _BadRow(Exception):
    """A stored value that cannot be read; ``str()`` says which and why."""


def _column_json(column: str, value: Any) -> Any:
    """The JSON value stored in ``column`` (text, or the bytes of a lone-surrogate text)."""
    if not isinstance(value, str | bytes):
        raise _BadRow(f"its {column} is not JSON text (it holds {type(value).__name__})")
    try:
        return _loads(value)
    except (ValueError, RecursionError) as exc:
        raise _BadRow(f"its {column} is not valid JSON ({_short(exc)})") from None


def _column_text(column: str, value: Any) -> str:
    if not isinstance(value, str | bytes):
        raise _BadRow(f"its {column} is not text (it holds {type(value).__name__})")
    try:
        return _untext(value)
    except ValueError as exc:
        raise _BadRow(f"its {column} is not UTF-8 text ({_short(exc)})") from None


def _short(exc: BaseException, limit: int = 160) -> str:
    text = str(exc) or type(exc).__name__
    return text if len(text) <= limit else text[:limit] + "…"


def _invalid(exc: ValidationError) -> str:
    """A pydantic error of a stored row in a line: the first field that is wrong, and how."""
    first = exc.errors(include_url=False)[0]
    where = ".".join(str(part) for part in first.get("loc", ())) or "row"
    got = repr(first.get("input"))
    got = got if len(got) <= 60 else got[:60] + "…"
    more = exc.error_count() - 1
    return (f"its {where} is invalid: {first.get('msg', 'wrong value')} (got {got})"
            + (f"; and {more} more" if more > 0 else ""))


def _record(row: tuple[Any, ...]) -> RunRecord:
    """The record of a ``runs`` row; a row that cannot be read whole gives a ``broken`` record
    naming what is wrong (never an exception: one bad row must not hide the others)."""
    try:
        return _whole_record(row)
    except _BadRow as exc:
        problem = str(exc)
    except ValidationError as exc:
        problem = _invalid(exc)
    except Exception as exc:  # noqa: BLE001 - whatever a foreign row holds, it is reported
        problem = f"it cannot be read ({type(exc).__name__}: {_short(exc)})"
    return _broken_record(row, problem)


def _whole_record(row: tuple[Any, ...]) -> RunRecord:
    (run_id, meta, script, args, created_at, ended_at, status, result, resumed_from, _owner,
     owner_pid, owner_host, agents, replayed, input_tokens, output_tokens, agents_failed,
     cost_usd) = row
    meta = _column_json("meta", meta)
    if not isinstance(meta, dict):
        raise _BadRow(f"its meta is not a JSON object (it is {type(meta).__name__})")
    loaded = None if result is None else _column_json("result", result)
    if loaded is not None and not isinstance(loaded, dict):
        raise _BadRow(f"its result is not a JSON object (it is {type(loaded).__name__})")
    return RunRecord(id=run_id, meta=meta, script=_column_text("script", script),
                     args=None if args is None else _column_json("args", args),
                     created_at=created_at, ended_at=ended_at, status=status,
                     result=None if loaded is None else _stored_result(loaded),
                     resumed_from=resumed_from, owner_pid=owner_pid, owner_host=owner_host,
                     agents=agents, replayed=replayed,
                     usage=Usage(input_tokens=input_tokens, output_tokens=output_tokens,
                                 cost_usd=cost_usd),
                     agents_failed=agents_failed)


def _broken_record(row: tuple[Any, ...], problem: str) -> RunRecord:
    """A ``broken`` record of ``row``: its id and what else reads cleanly (for the listing)."""
    run_id, meta, created_at, ended_at = row[0], row[1], row[4], row[5]
    if isinstance(run_id, bytes):
        run_id = run_id.decode("utf-8", "replace")
    run_id = str(run_id) if run_id is not None and str(run_id) else "(no id)"
    try:
        shown = _column_json("meta", meta)
    except _BadRow:
        shown = None
    name = shown.get("name") if isinstance(shown, dict) else None

    def when(value: Any) -> float | None:
        ok = isinstance(value, int | float) and not isinstance(value, bool) \
            and math.isfinite(value)
        return float(value) if ok else None

    return RunRecord(id=run_id, meta={"name": name} if isinstance(name, str) else {},
                     script="", created_at=when(created_at) or 0.0, ended_at=when(ended_at),
                     status="broken", problem=problem)

"""Reading a store: its pool of read connections, and the queries of runs, events and journal.

Reads run on anyio worker threads, each with a connection of its own (WAL readers do not wait
for writers); a few idle connections are kept for the next reads. The calls' queries are in
``calls.py``. Whatever a read finds that cannot be read surfaces as :class:`RunStoreError`.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from .connection import store_error
from .encoding import bound as _bound
from .liveness import Liveness
from .models import JournalEntry, JournalKind, RunRecord, RunStatus, RunStoreError, StoredEvent
from .rows import JOURNAL_SELECT, RUN_COLUMNS, BadRow, event_pairs, journal_entry, short

__all__ = ["Readers", "events", "get_run", "journal", "list_runs", "naming"]

T = TypeVar("T")

_READ_POOL = 4


class Readers:
    """The read connections of the store at ``path`` (``connect()`` opens one).

    Every read is bounded by ``timeout_s``; a storage failure is raised as
    :class:`RunStoreError`, and so is anything else a read raises (a row nothing foresaw).
    After :meth:`close`, reads raise :class:`RunStoreError`.
    """

    def __init__(self, path: str, connect: Callable[[], sqlite3.Connection], *,
                 busy_timeout_s: float, timeout_s: float) -> None:
        self._path = path
        self._connect = connect
        self._busy_timeout_s = busy_timeout_s
        self._timeout_s = timeout_s
        self._pool: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        self._closed = False

    async def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn(conn)`` on a worker thread, waited for at most ``timeout_s``."""
        with anyio.move_on_after(self._timeout_s) as scope:
            return await anyio.to_thread.run_sync(self.read_sync, fn, abandon_on_cancel=True)
        assert scope.cancelled_caught
        raise RunStoreError(self._path, f"a read got no answer within {self._timeout_s:g} s")

    def read_sync(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn(conn)`` on the calling thread."""
        if self._closed:
            raise RunStoreError(self._path, "the store is closed")
        with self._lock:
            conn = self._pool.pop() if self._pool else None
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
                                            f"{short(exc)}); is a row corrupt?") from exc
        finally:
            if conn is not None:
                with self._lock:
                    if keep and len(self._pool) < _READ_POOL and not self._closed:
                        self._pool.append(conn)
                        conn = None
                if conn is not None:
                    conn.close()

    def close(self) -> None:
        """Refuse further reads and close the idle connections (a read under way closes its
        own when done); idempotent."""
        self._closed = True
        with self._lock:
            idle, self._pool = self._pool, []
        for conn in idle:
            conn.close()


def get_run(conn: sqlite3.Connection, path: str, run_id: str,
            liveness: Liveness) -> RunRecord | None:
    """The run (liveness-checked), or None; a row that cannot be read whole raises."""
    row = conn.execute(f"SELECT {RUN_COLUMNS} FROM runs WHERE id = ?", (run_id,)).fetchone()
    if row is None:
        return None
    record = liveness.records([row])[0]
    if record.problem is not None:
        raise RunStoreError(path, f"run {run_id!r} is broken: {record.problem}")
    return record


def list_runs(conn: sqlite3.Connection, liveness: Liveness, *, limit: int | None,
              status: RunStatus | None) -> list[RunRecord]:
    """Runs newest first, at most ``limit``, only those whose (liveness-checked) status is
    ``status`` if given; a row that cannot be read whole is a ``broken`` record."""
    sql = f"SELECT {RUN_COLUMNS} FROM runs"
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
    records = liveness.records(conn.execute(sql, params).fetchall())
    if status is not None:
        records = [record for record in records if record.status == status]
    return records if limit is None else records[:limit]


def events(conn: sqlite3.Connection, path: str, run_id: str, *, after: int,
           limit: int | None) -> list[StoredEvent]:
    """The run's events with ``seq > after``, in order, at most ``limit``."""
    found: list[StoredEvent] = []
    rows = conn.execute("SELECT first_seq, data FROM events WHERE run_id = ? "
                        "AND last_seq > ? ORDER BY first_seq", (run_id, _bound(after)))
    for first_seq, data in rows:
        try:
            pairs = event_pairs(first_seq, data)
        except BadRow as exc:
            raise RunStoreError(path, f"run {run_id!r} is broken: {exc}") from None
        for seq, at, event in pairs:
            if seq <= after:
                continue
            if limit is not None and len(found) >= limit:
                return found
            found.append(StoredEvent(run_id=run_id, seq=seq, at=at, data=event))
    return found


def journal(conn: sqlite3.Connection, path: str, run_id: str, *,
            kind: JournalKind | None) -> list[JournalEntry]:
    """The run's journal entries ordered by ``seq`` (then kind), only those of ``kind`` if
    given."""
    sql = JOURNAL_SELECT + " WHERE run_id = ?"
    params: tuple[Any, ...] = (run_id,)
    if kind is not None:
        sql += " AND kind = ?"
        params += (kind,)
    rows = conn.execute(sql + " ORDER BY seq, kind", params).fetchall()
    try:
        return [journal_entry(run_id, row) for row in rows]
    except BadRow as exc:
        raise RunStoreError(path, f"run {run_id!r} has a broken journal: {exc}") from None


def naming(path: str, run_id: str, read: Callable[[], T]) -> T:
    """``read()``, with a stored call record that cannot be read (corrupt JSON, wrong types)
    reported as a :class:`RunStoreError` naming the run."""
    try:
        return read()
    except (ValueError, TypeError, RecursionError) as exc:  # ValidationError is a ValueError
        raise RunStoreError(path, f"run {run_id!r} has a broken call record: "
                                  f"{type(exc).__name__}: {short(exc)}") from None

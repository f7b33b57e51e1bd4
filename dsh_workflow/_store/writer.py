"""The store's one writer thread: a queue of jobs, run in group-committed transactions.

Every write of a store goes through one :class:`Writer`. Its thread takes the first job waiting
in the queue plus every job queued behind it (up to :data:`MAX_BATCH`), runs them all inside one
``BEGIN IMMEDIATE … COMMIT``, and only then wakes their waiters, one loop callback per event
loop for the whole batch. So a thousand callers that commit at once cost one transaction, and a
caller is woken only once its data is committed. Jobs run in queue order (FIFO), so anything
queued before a committed job is committed too.

Plain inserts travel as *bulk* items instead of callables: the rows of all bulk items of one
kind that follow each other in a batch are handed to that kind's inserter together, so a batch of
a thousand journal entries costs a few statements rather than a thousand (see ``bulk.py``).
Bulk rows are written before the next callable job runs, so queue order holds.

When a job raises, the batch is rolled back and its jobs are run again one transaction each, so
one bad job fails alone. When ``BEGIN`` or ``COMMIT`` fails (locked, disk full, I/O error), the
whole batch fails with that error. When the connection cannot even be opened, every queued job
fails and the thread ends; the next job starts a fresh thread (a transient lock does not break
the store for good).
"""

from __future__ import annotations

import collections
import logging
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

import anyio

from .._loop import LoopHandle
from .connection import store_error
from .models import RunStoreError

__all__ = ["MAX_BATCH", "Waiter", "Writer"]

logger = logging.getLogger("dsh_workflow.store")

MAX_BATCH = 4096
"""Most jobs one transaction takes; bounds how long a batch holds the write lock."""

Job = Callable[[sqlite3.Connection], Any]


class Waiter:
    """The loop side of one job: set once the job's transaction committed or failed, or once
    the writer's ``timeout_s`` passed without either (whichever comes first settles it).

    Create it on the event loop (it captures ``handle``); read ``result`` / ``error`` after
    ``event`` is set. Any number of tasks may wait on one waiter.
    """

    __slots__ = ("_claim", "error", "event", "handle", "result")

    def __init__(self, handle: LoopHandle) -> None:
        self.handle = handle
        self.event = anyio.Event()
        self.result: Any = None
        self.error: RunStoreError | None = None
        self._claim = threading.Lock()

    def claim(self) -> bool:
        """True exactly once: for whoever settles this waiter."""
        return self._claim.acquire(blocking=False)

    @property
    def settled(self) -> bool:
        return self._claim.locked()

    def fail_now(self, error: RunStoreError) -> None:
        """Settle with ``error`` on the loop thread (when the job could not even be queued)."""
        if self.claim():
            self.error = error
            self.event.set()


class _Item:
    __slots__ = ("fn", "kind", "payload", "quiet", "waiter")

    def __init__(self, fn: Job | None, waiter: Waiter | None, quiet: bool,
                 kind: str | None = None, payload: Any = None) -> None:
        self.fn = fn
        self.waiter = waiter
        self.quiet = quiet
        self.kind = kind
        self.payload = payload


class Writer:
    """One store's writer thread (started on the first job, ended by :meth:`stop`).

    ``bulk[kind](conn, payloads)`` writes the payloads of consecutive bulk items of ``kind``;
    A waiter not settled within ``timeout_s`` of its submission is failed by the writer's
    watchdog thread (checked every ``min(timeout_s, 1)`` s), so a writer stuck in the file
    system cannot hang its callers. The watchdog lives until the writer thread has ended after
    :meth:`stop` (or, while the store stays open, until nothing is left to guard).

    ``on_connect(conn)`` prepares a new connection (schema migration) on the writer thread;
    ``on_rollback()`` is told whenever a transaction was rolled back (so caches of what was
    written can be dropped); ``on_error(error)`` receives the failure of a job nobody waits for
    (unless it was submitted ``quiet``). ``on_begin(conn)``, if given, runs right after each
    ``BEGIN`` (holding the write lock) and may raise to fail the whole batch (a file that is no
    longer the store's).
    """

    def __init__(self, path: str, *, connect: Callable[[], sqlite3.Connection],
                 on_connect: Callable[[sqlite3.Connection], None],
                 on_rollback: Callable[[], None],
                 on_error: Callable[[RunStoreError], None],
                 on_begin: Callable[[sqlite3.Connection], None] | None = None,
                 bulk: Mapping[str, Callable[[sqlite3.Connection, list[Any]], None]],
                 busy_timeout_s: float, timeout_s: float) -> None:
        self._path = path
        self._connect = connect
        self._on_connect = on_connect
        self._on_rollback = on_rollback
        self._on_error = on_error
        self._on_begin = on_begin
        self._bulk = dict(bulk)
        self._busy_timeout_s = busy_timeout_s
        self._timeout_s = timeout_s
        self._watched: collections.deque[tuple[float, Waiter]] = collections.deque()
        self._watchdog: threading.Thread | None = None
        self._watch_stop = threading.Event()
        self._queue: queue.SimpleQueue[_Item] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._alive = False
        self._closed = False
        self.transactions = 0
        """Transactions committed so far (written by the writer thread only)."""

    @property
    def threads(self) -> list[threading.Thread]:
        """The writer and watchdog threads (to join after :meth:`stop`)."""
        return [t for t in (self._thread, self._watchdog) if t is not None]

    def submit(self, fn: Job, waiter: Waiter | None = None, *, quiet: bool = False) -> None:
        """Queue ``fn`` to run on the writer thread inside a transaction; never blocks.

        Raises :class:`RunStoreError` once the writer was stopped.
        """
        self._put(_Item(fn, waiter, quiet))

    def submit_bulk(self, kind: str, payload: Any, waiter: Waiter | None = None) -> None:
        """Queue ``payload`` for the ``kind`` inserter; never blocks (see :meth:`submit`)."""
        if kind not in self._bulk:
            raise ValueError(f"no bulk inserter for {kind!r}")
        self._put(_Item(None, waiter, False, kind, payload))

    def stop(self, waiter: Waiter) -> bool:
        """Let the thread finish every queued job, then end; ``waiter`` is set when it has.

        Returns False (and sets nothing) when no thread is running. Idempotent: later calls
        and later jobs raise :class:`RunStoreError`.
        """
        with self._lock:
            if self._closed:
                raise RunStoreError(self._path, "the store is closed")
            self._closed = True
            if not self._alive:
                self._watch_stop.set()
                return False
            self._queue.put(_Item(None, waiter, False))
            return True

    def _put(self, item: _Item) -> None:
        with self._lock:
            if self._closed:
                raise RunStoreError(self._path, "the store is closed")
            if not self._alive:
                self._thread = threading.Thread(
                    target=self._main, name=f"dsh-workflow-store {self._path}", daemon=True)
                self._alive = True
                self._thread.start()
            if item.waiter is not None:
                self._watched.append((time.monotonic() + self._timeout_s, item.waiter))
                if self._watchdog is None:
                    self._watchdog = threading.Thread(
                        target=self._watch, name=f"dsh-workflow-store-watchdog {self._path}",
                        daemon=True)
                    self._watchdog.start()
            self._queue.put(item)

    def _watch(self) -> None:
        period = min(self._timeout_s, 1.0)
        while not self._watch_stop.wait(period):
            now = time.monotonic()
            expired: list[Waiter] = []
            with self._lock:
                watched = self._watched
                while watched and (watched[0][1].settled or watched[0][0] <= now):
                    deadline, waiter = watched.popleft()
                    if deadline <= now:
                        expired.append(waiter)
                if not watched and not self._alive:
                    self._watchdog = None  # nothing to guard; the next waiter starts another
                    return
            for waiter in expired:
                if waiter.claim():
                    waiter.error = RunStoreError(
                        self._path, f"no answer from the writer within {self._timeout_s:g} s")
                    waiter.handle.post(_wake, [waiter])

    # ---- the thread -------------------------------------------------------------------------

    def _main(self) -> None:
        try:
            conn = self._connect()
            try:
                self._on_connect(conn)
            except BaseException:
                conn.close()
                raise
        except BaseException as exc:  # noqa: BLE001 - every queued job must hear of it
            error = store_error(self._path, exc, busy_timeout_s=self._busy_timeout_s)
            with self._lock:
                self._alive = False
                items = self._drain()
                if self._closed:
                    self._watch_stop.set()
            self._finish(items, error)
            return
        try:
            self._loop(conn)
            with self._lock:
                self._alive = False
                self._watch_stop.set()  # stopped: every waiter was answered
        except BaseException as exc:  # a bug, not a storage failure: still answer everyone
            logger.exception("run store %s: the writer thread failed", self._path)
            error = RunStoreError(self._path, f"the writer thread failed: {exc!r}")
            with self._lock:
                self._alive = False
                items = self._drain()
            self._finish(items, error)
        finally:
            conn.close()

    def _drain(self) -> list[_Item]:
        items: list[_Item] = []
        while True:
            try:
                items.append(self._queue.get_nowait())
            except queue.Empty:
                return items

    def _loop(self, conn: sqlite3.Connection) -> None:
        while True:
            batch = [self._queue.get()]
            while len(batch) < MAX_BATCH:
                try:
                    batch.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            stop = batch[-1] if batch[-1].fn is None and batch[-1].kind is None else None
            jobs = batch[:-1] if stop is not None else batch
            if jobs:
                self._run_batch(conn, jobs)
            if stop is not None:
                self._finish([stop], None)
                return

    def _run_batch(self, conn: sqlite3.Connection, jobs: list[_Item]) -> None:
        results: list[Any] = [None] * len(jobs)
        pending: dict[str, list[Any]] = {}
        stage = "begin"
        try:
            conn.execute("BEGIN IMMEDIATE")
            if self._on_begin is not None:
                self._on_begin(conn)
            stage = "jobs"
            for index, item in enumerate(jobs):
                if item.kind is not None:
                    pending.setdefault(item.kind, []).append(item.payload)
                    continue
                if pending:
                    self._write_bulk(conn, pending)
                results[index] = item.fn(conn)  # type: ignore[misc]  # a job without a kind always has its fn
            if pending:
                self._write_bulk(conn, pending)
            stage = "commit"
            conn.execute("COMMIT")
            self.transactions += 1
        except Exception as exc:  # noqa: BLE001 - a failed job's error is handed to its waiter
            self._rollback(conn)
            if stage == "jobs" and len(jobs) > 1:
                for item in jobs:  # one bad job must fail alone
                    self._run_batch(conn, [item])
                return
            self._finish(jobs, store_error(self._path, exc, busy_timeout_s=self._busy_timeout_s))
            return
        self._finish(jobs, None, results)

    def _write_bulk(self, conn: sqlite3.Connection, pending: dict[str, list[Any]]) -> None:
        for kind, payloads in pending.items():
            self._bulk[kind](conn, payloads)
        pending.clear()

    def _rollback(self, conn: sqlite3.Connection) -> None:
        try:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
        except sqlite3.Error:
            logger.debug("run store %s: rollback failed", self._path, exc_info=True)
        self._on_rollback()

    def _finish(self, items: list[_Item], error: RunStoreError | None,
                results: list[Any] | None = None) -> None:
        """Hand each item its outcome and wake its waiter (one loop callback per loop)."""
        groups: dict[int, tuple[LoopHandle, list[Waiter]]] = {}
        for index, item in enumerate(items):
            waiter = item.waiter
            if waiter is None:
                if error is not None and not item.quiet:
                    self._on_error(error)
                elif error is not None:
                    logger.debug("run store %s: %s", self._path, error.reason)
                continue
            if not waiter.claim():
                continue  # the watchdog failed it already
            if error is not None:
                waiter.error = error
            elif results is not None:
                waiter.result = results[index]
            group = groups.get(id(waiter.handle))
            if group is None:
                groups[id(waiter.handle)] = (waiter.handle, [waiter])
            else:
                group[1].append(waiter)
        for handle, waiters in groups.values():
            handle.post(_wake, waiters)


def _wake(waiters: list[Waiter]) -> None:
    for waiter in waiters:
        waiter.event.set()

"""Opening the store's file: connections in WAL mode, the file's identity, and storage
failures as errors a user can act on.

:class:`StoreFile` is one store's file: it makes a new file owner-only before SQLite first opens
it, opens connections (the writer's and the readers'), upgrades the schema on the writer's first
connection (``migrations.py``) and, before each write transaction, checks that the path still
names the file the writer opened.
"""

from __future__ import annotations

import os
import sqlite3

from .files import prepare_database
from .migrations import migrate
from .models import RunStoreError

__all__ = ["StoreFile", "connect", "store_error"]


class StoreFile:
    """The database file at ``path`` (absolute) as one store opens it.

    ``synchronous`` and ``busy_timeout_s`` apply to every connection (see :func:`connect`).
    :meth:`prepare` and :meth:`check` run on the writer thread only.
    """

    def __init__(self, path: str, *, synchronous: str, busy_timeout_s: float) -> None:
        self.path = path
        self.synchronous = synchronous
        self.busy_timeout_s = busy_timeout_s
        self._ready = False  # the file was made owner-only (files.prepare_database)
        self._identity: tuple[int, int] | None = None  # writer thread only: (st_dev, st_ino)

    def connect(self) -> sqlite3.Connection:
        """A new connection to the file (made owner-only first, if this store has not yet)."""
        if not self._ready:
            # Before SQLite first opens it: a new file (and so its -wal and -shm) owner-only.
            prepare_database(self.path)
            self._ready = True
        return connect(self.path, synchronous=self.synchronous,
                       busy_timeout_s=self.busy_timeout_s)

    def prepare(self, conn: sqlite3.Connection) -> None:
        """The writer's new connection: bring the schema up to date, remember which file it is."""
        migrate(conn, self.path)
        info = os.stat(self.path)
        self._identity = (info.st_dev, info.st_ino)

    def check(self, conn: sqlite3.Connection) -> None:
        """Before each write transaction: the file at the path is still the one the writer
        opened. SQLite does not notice a file replaced (renamed over, or removed) under an open
        connection: it would go on committing to the unlinked old file, and every commit would
        be lost. One ``stat`` per (group-committed) transaction does. Only the path is looked
        at: opening and closing the database file here would drop SQLite's POSIX locks, which
        belong to the whole process."""
        try:
            info = os.stat(self.path)
        except FileNotFoundError:
            raise RunStoreError(self.path, "the database file was removed while the store "
                                           "was open") from None
        if (info.st_dev, info.st_ino) != self._identity:
            raise RunStoreError(self.path, "the database file was replaced by another file "
                                           "while the store was open")


def store_error(path: str, exc: BaseException, *,
                busy_timeout_s: float | None = None) -> RunStoreError:
    """A low-level failure as a :class:`RunStoreError` with a reason a user can act on."""
    if isinstance(exc, RunStoreError):
        return exc
    text = str(exc) or type(exc).__name__
    lowered = text.lower()
    if "locked" in lowered or "busy" in lowered:
        waited = f" (waited {busy_timeout_s:g} s)" if busy_timeout_s is not None else ""
        reason = f"the database is locked by another connection{waited}: {text}"
    elif "foreign key" in lowered:
        reason = f"no such run (a write named a run that is not in the store): {text}"
    elif "not a database" in lowered:
        reason = f"the file is not a SQLite database (or is corrupt): {text}"
    elif "malformed" in lowered or "corrupt" in lowered:
        reason = f"the database file is corrupt: {text}"
    elif "readonly" in lowered or "read-only" in lowered:
        reason = f"the database is read-only: {text}"
    elif "disk i/o error" in lowered:
        name = getattr(exc, "sqlite_errorname", None)
        detail = f" ({name})" if name else ""
        reason = (f"the file could not be read or written{detail}: is it read-only, immutable, "
                  f"removed, or is the disk failing? {text}")
    elif "full" in lowered:
        reason = f"the disk is full: {text}"
    elif "unable to open" in lowered:
        reason = f"the file cannot be opened (missing folder or no permission?): {text}"
    elif isinstance(exc, OSError):
        reason = f"{type(exc).__name__}: {text}"
    else:
        reason = text
    return RunStoreError(path, reason)


def connect(path: str, *, synchronous: str, busy_timeout_s: float) -> sqlite3.Connection:
    """Open ``path`` in WAL mode with the given durability; raises the ``sqlite3`` error as is.

    Autocommit mode (``isolation_level=None``): callers issue ``BEGIN``/``COMMIT`` themselves.
    The connection may be handed between threads, but used by one thread at a time.
    """
    conn = sqlite3.connect(path, timeout=busy_timeout_s, isolation_level=None,
                           check_same_thread=False)
    try:
        mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
        if str(mode).lower() != "wal":
            raise sqlite3.OperationalError(
                f"cannot switch the file to WAL mode (it stays {mode!r}); is it read-only?")
        conn.execute(f"PRAGMA synchronous = {synchronous}")
        conn.execute("PRAGMA foreign_keys = ON")
    except BaseException:
        conn.close()
        raise
    return conn

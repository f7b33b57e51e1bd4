"""Who owns a running run, and whether that owner is still alive.

Every store that creates runs holds an *owner lock*: a file ``<token>.lock`` in the folder
``<database>-owners/`` beside the database, locked with ``flock(LOCK_EX)`` for as long as the
store is open. The kernel drops an ``flock`` when the process dies, however it dies (``kill -9``
included), so any process on the same machine can tell a live owner from a dead one by trying
the lock without blocking: it fails while the owner lives and succeeds once it is gone.

A lock file is created under a temporary name, locked, and only then renamed to its final name,
so a checker never sees an unlocked final file of a live owner. A checker that takes the lock of
a dead owner removes the file; a missing file also means a dead owner.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid

from .files import PRIVATE_FILE, private_folder

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX: SQLiteRunStore refuses to start
    fcntl = None  # type: ignore[assignment]  # the module is absent off POSIX

__all__ = ["SUPPORTED", "OwnerLock", "owner_alive", "owners_dir", "sweep_dead_owners"]

SUPPORTED = fcntl is not None
"""Whether this platform has ``flock`` (POSIX); the store needs it to tell dead owners."""

HOST = socket.gethostname()


def owners_dir(db_path: str) -> str:
    """The folder holding the owner locks of the store at ``db_path``."""
    return db_path + "-owners"


class OwnerLock:
    """This process's owner lock for one store: :meth:`acquire` takes it, :meth:`release` drops it.

    Thread-safe. ``token`` is the name recorded in each run the store creates.
    """

    def __init__(self, db_path: str) -> None:
        self._dir = owners_dir(db_path)
        self.token = uuid.uuid4().hex
        self._fd: int | None = None
        self._lock = threading.Lock()

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> None:
        """Take the lock (idempotent); raises ``OSError`` when the folder cannot be written."""
        with self._lock:
            if self._fd is not None:
                return
            private_folder(self._dir)
            final = os.path.join(self._dir, f"{self.token}.lock")
            temp = final + ".tmp"
            fd = os.open(temp, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC,
                         PRIVATE_FILE)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                os.write(fd, f"{os.getpid()} {HOST}\n".encode())
                os.rename(temp, final)
            except BaseException:
                os.close(fd)
                _unlink(temp)
                raise
            self._fd = fd
        sweep_dead_owners(self._dir, keep=self.token)

    def release(self) -> None:
        """Drop the lock and remove its file (idempotent). Runs still marked ``running`` with
        this token read as ``interrupted`` afterwards."""
        with self._lock:
            fd, self._fd = self._fd, None
            if fd is None:
                return
            _unlink(os.path.join(self._dir, f"{self.token}.lock"))
            os.close(fd)


def owner_alive(db_path: str, token: str) -> bool:
    """Whether the store that holds owner ``token`` is still alive (on this machine).

    Never blocks. A dead owner's lock file is removed on the way.
    """
    path = os.path.join(owners_dir(db_path), f"{token}.lock")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    except OSError:
        return True  # cannot tell (permissions): never declare a run dead on a guess
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        except OSError:
            return True
        _unlink(path)
        return False
    finally:
        os.close(fd)


_TEMP_GRACE_S = 60.0


def sweep_dead_owners(folder: str, *, keep: str) -> None:
    """Remove the lock files of owners that are gone (their runs then read ``interrupted``,
    exactly as before: a missing lock file means a dead owner). Half-made ``.tmp`` files are
    left alone for a minute, so an owner in the middle of :meth:`OwnerLock.acquire` keeps its own.
    """
    try:
        names = os.listdir(folder)
    except OSError:
        return
    now = time.time()
    for name in names:
        if name.startswith(keep):
            continue
        path = os.path.join(folder, name)
        if name.endswith(".lock.tmp"):
            try:
                if now - os.stat(path).st_mtime < _TEMP_GRACE_S:
                    continue
            except OSError:
                continue
        elif not name.endswith(".lock"):
            continue
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            continue  # alive (or cannot tell)
        else:
            _unlink(path)
        finally:
            os.close(fd)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass

"""Owner-only files: the store's database, its WAL/SHM files and its owners' folder and locks.

A store holds every script, argument and answer in clear, so none of its files is readable by
another local user, whatever the umask and whether or not its folder already existed:

- :func:`prepare_database` creates a missing database file empty with mode ``0o600`` before
  SQLite opens it (SQLite gives the ``-wal`` and ``-shm`` files it creates the database file's
  mode, so they are owner-only too), never following a symbolic link when creating; an existing
  database, ``-wal`` or ``-shm`` file owned by this user that is readable or writable by others
  is tightened to ``0o600`` (files of other users are left as they are);
- :func:`private_folder` creates a folder ``0o700`` (and tightens one this user owns);
- :data:`PRIVATE_FILE` is the mode every other file of the store is created with.
"""

from __future__ import annotations

import os
import stat

__all__ = ["PRIVATE_DIR", "PRIVATE_FILE", "prepare_database", "private_folder", "tighten"]

PRIVATE_FILE = 0o600
PRIVATE_DIR = 0o700
_SIDE_FILES = ("-wal", "-shm", "-journal")


def tighten(path: str, mode: int) -> None:
    """Drop every permission bit of ``path`` outside ``mode`` if this user owns it (a missing
    file, or one that cannot be changed, is left alone: SQLite reports what matters)."""
    try:
        info = os.stat(path)
    except OSError:
        return
    current = stat.S_IMODE(info.st_mode)
    if info.st_uid != os.geteuid() or current & ~mode == 0:
        return
    try:
        os.chmod(path, current & mode)
    except OSError:
        pass


def prepare_database(path: str) -> None:
    """Make the database file at ``path`` owner-only before SQLite opens it (module docstring).

    Never raises: a folder that is missing or read-only is reported by SQLite's own open.
    """
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, PRIVATE_FILE)
    except FileExistsError:
        tighten(path, PRIVATE_FILE)
    except OSError:
        return
    else:
        os.close(fd)
    for suffix in _SIDE_FILES:
        tighten(path + suffix, PRIVATE_FILE)


def private_folder(path: str) -> None:
    """Create the folder ``path`` owner-only (missing parents get the usual mode), or tighten
    it when this user owns it; raises ``OSError`` when it cannot be created."""
    os.makedirs(path, mode=PRIVATE_DIR, exist_ok=True)
    tighten(path, PRIVATE_DIR)

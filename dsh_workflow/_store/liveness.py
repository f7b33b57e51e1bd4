"""Whether a ``running`` run is still running: a run whose owner process died reads
``interrupted`` (``owners.py`` tells a live owner from a dead one); and why one that still runs
cannot be resumed (:func:`still_running`, the engine's and the command line's one text)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from .models import RunRecord
from .owners import HOST, OwnerLock, owner_alive
from .rows import record
from .tables import RunRecordRow

__all__ = ["Liveness", "still_running"]


def still_running(record: RunRecord) -> str:
    """Why a run that is still ``running`` cannot be resumed (its owner is alive, or on
    another machine where this one cannot tell)."""
    where = f"process {record.owner_pid}" if record.owner_pid is not None else "its process"
    if record.owner_host:
        where += f" on {record.owner_host}"
    return (f"run {record.id!r} is still running ({where}); resuming it now would run its "
            f"unfinished agent() calls a second time — wait for it to end, or stop it, first")


class Liveness:
    """The liveness of the runs of the store at ``path`` as its reads see them.

    ``owner`` is this store's own lock (its runs are alive while it is held); ``mark(owner,
    now)`` is told of each dead owner found, to mark its runs ``interrupted`` in the file.
    Owners found dead are remembered (a dead process does not come back).
    """

    def __init__(self, path: str, owner: OwnerLock,
                 mark: Callable[[str, float], None]) -> None:
        self._path = path
        self._owner = owner
        self._mark = mark
        self._dead_owners: set[str] = set()

    def records(self, rows: list[tuple[Any, ...]]) -> list[RunRecord]:
        """Records from ``runs`` rows, with ``running`` runs of dead owners read as
        ``interrupted``; each dead owner found is marked (see the class)."""
        now = time.time()
        found_dead: list[str] = []
        records = []
        for row in rows:
            found = record(row)
            owner = RunRecordRow._make(row).owner
            if found.status == "running" and isinstance(owner, str) and self._owner_dead(
                    owner, found.owner_host):
                if owner not in found_dead:
                    found_dead.append(owner)
                found = found.model_copy(update={"status": "interrupted", "ended_at": now})
            records.append(found)
        for owner in found_dead:
            self._mark(owner, now)
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

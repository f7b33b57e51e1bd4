"""How other commands learn that a viewer serves a store: a small file beside the store.

Contract: while ``dsh-workflow ui`` serves the store ``PATH`` it keeps ``PATH-ui.json``
(``{"url", "pid", "store"}``, written atomically, removed when it stops). :func:`viewer_url`
reads it and returns the page of a run only when the file names this store and its process is
still alive, so a file left behind by a killed viewer is ignored (and removed).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from dataclasses import dataclass

__all__ = ["Beacon", "beacon_path", "read_beacon", "remove_beacon", "viewer_url", "write_beacon"]


@dataclass(frozen=True)
class Beacon:
    """A running viewer: its base URL (no trailing slash), its process and the store it serves."""

    url: str
    pid: int
    store: str


def beacon_path(store_path: str) -> str:
    """The beacon file of the store file ``store_path``."""
    return os.path.abspath(store_path) + "-ui.json"


def write_beacon(store_path: str, url: str, *, pid: int | None = None) -> Beacon:
    """Announce a viewer of ``store_path`` at ``url`` (replaces an earlier beacon)."""
    beacon = Beacon(url=url.rstrip("/"), pid=os.getpid() if pid is None else pid,
                    store=os.path.abspath(store_path))
    target = beacon_path(store_path)
    fd, temporary = tempfile.mkstemp(prefix=".ui-", dir=os.path.dirname(target))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            json.dump(beacon.__dict__, file)
        os.replace(temporary, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise
    return beacon


def remove_beacon(store_path: str, *, pid: int | None = None) -> None:
    """Remove the beacon if it is this process's (or ``pid``'s); another viewer's stays."""
    current = _load(beacon_path(store_path))
    if current is not None and current.pid == (os.getpid() if pid is None else pid):
        with contextlib.suppress(OSError):
            os.unlink(beacon_path(store_path))


def read_beacon(store_path: str) -> Beacon | None:
    """The live viewer of ``store_path``, or None (no beacon, another store's, or its process
    is gone; a dead viewer's beacon is removed)."""
    path = beacon_path(store_path)
    beacon = _load(path)
    if beacon is None or beacon.store != os.path.abspath(store_path):
        return None
    if not _alive(beacon.pid):
        with contextlib.suppress(OSError):
            os.unlink(path)
        return None
    return beacon


def viewer_url(store_path: str, run_id: str) -> str | None:
    """The viewer's page of ``run_id`` when a viewer serves ``store_path``, else None."""
    beacon = read_beacon(store_path)
    return None if beacon is None else f"{beacon.url}/runs/{run_id}"


def _load(path: str) -> Beacon | None:
    try:
        with open(path, encoding="utf-8") as file:
            data = json.load(file)
        return Beacon(url=str(data["url"]), pid=int(data["pid"]), store=str(data["store"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process: it exists
    return True

"""How other commands learn that a viewer serves a store: a small file beside the store.

Contract: while ``dsh-workflow ui`` serves the store ``PATH`` it keeps ``PATH-ui.json``
(``{"url", "pid", "store", "token"}``, removed when it stops). The file holds the viewer's
token, so it is created owner-only: a new file opened with mode ``0600`` (never widened and
narrowed later), written, then renamed over the old one (atomic). :func:`viewer_url` reads it
and returns the page of a run — with ``?token=`` so the link opens the viewer — only when the
file names this store, belongs to the current user and its process is still alive, so a file
left behind by a killed viewer is ignored (and removed).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
from dataclasses import dataclass, field
from urllib.parse import quote

__all__ = ["Beacon", "beacon_path", "read_beacon", "remove_beacon", "viewer_url", "write_beacon"]


@dataclass(frozen=True)
class Beacon:
    """A running viewer: its base URL (no trailing slash), its process, the store it serves and
    its access token (None in a beacon written before viewers had one)."""

    url: str
    pid: int
    store: str
    token: str | None = field(default=None, repr=False)


def beacon_path(store_path: str) -> str:
    """The beacon file of the store file ``store_path``."""
    return os.path.abspath(store_path) + "-ui.json"


def write_beacon(store_path: str, url: str, *, token: str | None = None,
                 pid: int | None = None) -> Beacon:
    """Announce a viewer of ``store_path`` at ``url`` taking ``token`` (replaces an earlier
    beacon; the file is owner-only from its creation)."""
    beacon = Beacon(url=url.rstrip("/"), pid=os.getpid() if pid is None else pid,
                    store=os.path.abspath(store_path), token=token)
    target = beacon_path(store_path)
    temporary = os.path.join(os.path.dirname(target), f".ui-{secrets.token_hex(8)}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(temporary, flags, 0o600)
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
    """The viewer's page of ``run_id`` when a viewer serves ``store_path``, else None; it
    carries the viewer's token (``?token=``), which the viewer trades for its cookie."""
    beacon = read_beacon(store_path)
    if beacon is None:
        return None
    page = f"{beacon.url}/runs/{quote(run_id, safe='')}"
    return page if beacon.token is None else f"{page}?token={quote(beacon.token, safe='')}"


def _load(path: str) -> Beacon | None:
    try:
        with open(path, encoding="utf-8") as file:
            if hasattr(os, "getuid") and os.fstat(file.fileno()).st_uid != os.getuid():
                return None  # not written by this user's viewer
            data = json.load(file)
        token = data.get("token")
        return Beacon(url=str(data["url"]), pid=int(data["pid"]), store=str(data["store"]),
                      token=None if token is None else str(token))
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
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

"""Addresses printed when they can be used: a uvicorn server that prints its address only once
it serves (``ui``, ``mcp --http``), and a run's page in the viewer that serves its store
(:func:`announce_viewer`, ``run`` and ``resume``).

Whoever reads the printed address may press Ctrl-C (or send SIGTERM) at once. uvicorn installs
its signal handlers when serving begins; a signal that arrived before that could interrupt its
start-up half-way and leave the command hanging. Printing from the end of uvicorn's start-up
closes that window. uvicorn is imported by the caller (it is an extra)."""

from __future__ import annotations

import socket
import sys
from collections.abc import Callable
from typing import Any

__all__ = ["announce_viewer", "announcing_server"]


def announcing_server(config: Any, text: str) -> Any:
    """A ``uvicorn.Server`` for ``config`` that writes ``text`` (a line, or several) to stderr
    once its start-up has succeeded and its signal handlers are in place; never before, and
    not at all when start-up fails."""
    import uvicorn

    class AnnouncingServer(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if self.started:
                sys.stderr.write(text if text.endswith("\n") else text + "\n")
                sys.stderr.flush()

    return AnnouncingServer(config)


def announce_viewer(store_path: str | None, run_id: str,
                    write: Callable[[str], object] | None = None) -> str | None:
    """When a viewer (``dsh-workflow ui``) serves ``store_path``, write ``viewer: <run page
    URL>`` (default: a line on stderr) and return the URL; else do nothing and return None.
    Never raises."""
    if store_path is None:
        return None
    from dsh_workflow._ui.beacon import viewer_url

    try:
        url = viewer_url(store_path, run_id)
    except Exception:  # noqa: BLE001 - a broken beacon must never disturb a run
        return None
    if url is None:
        return None
    line = f"viewer: {url}"
    if write is None:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
    else:
        write(line)
    return url

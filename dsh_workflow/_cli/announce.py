"""A uvicorn server that prints its address only once it serves (``ui``, ``mcp --http``).

Whoever reads the printed address may press Ctrl-C (or send SIGTERM) at once. uvicorn installs
its signal handlers when serving begins; a signal that arrived before that could interrupt its
start-up half-way and leave the command hanging. Printing from the end of uvicorn's start-up
closes that window. uvicorn is imported by the caller (it is an extra)."""

from __future__ import annotations

import socket
import sys
from typing import Any


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

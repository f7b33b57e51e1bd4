"""Waking the event loop from a foreign thread, for trio and asyncio alike.

anyio offers only *blocking* calls from a foreign thread into the loop; a runtime thread must
never wait for the loop, so this module posts a callback without waiting, using the backend's
own thread-safe primitive.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import sniffio

__all__ = ["LoopHandle"]

logger = logging.getLogger("dsh_workflow.engine")


class LoopHandle:
    """Posts callbacks onto the event loop that created it, from any thread.

    Create it inside the loop (it captures the running trio token or asyncio loop). ``post``
    never blocks and never raises: once the loop is gone the callback is dropped. Callbacks run
    on the loop thread and must not raise (a raise there would crash trio's run loop), so each is
    wrapped and its exception logged.
    """

    def __init__(self) -> None:
        library = sniffio.current_async_library()
        if library == "trio":
            import trio

            token = trio.lowlevel.current_trio_token()
            self._post: Callable[..., Any] = token.run_sync_soon
            self._closed_errors: tuple[type[BaseException], ...] = (trio.RunFinishedError,)
        elif library == "asyncio":
            import asyncio

            loop = asyncio.get_running_loop()
            self._post = loop.call_soon_threadsafe
            self._closed_errors = (RuntimeError,)
        else:  # pragma: no cover - anyio supports only these two
            raise RuntimeError(f"unsupported async library {library!r}")

    def post(self, callback: Callable[..., object], *args: object) -> None:
        """Run ``callback(*args)`` soon on the loop thread; drop it if the loop has finished."""
        try:
            self._post(_guarded, callback, args)
        except self._closed_errors:
            pass


def _guarded(callback: Callable[..., object], args: tuple[object, ...]) -> None:
    try:
        callback(*args)
    except Exception:  # a raise here would take the whole loop down
        logger.exception("dsh-workflow: a loop callback failed")

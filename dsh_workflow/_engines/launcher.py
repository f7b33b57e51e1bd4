"""Starting threads without making the event loop wait for them.

``threading.Thread.start()`` returns only once the new thread has bootstrapped, and on a busy
2-core machine that includes handing the GIL back and forth with it: 0.5 to 4 ms measured per
start, all of it time the loop could not run. A :class:`ThreadLauncher` does that waiting on a
thread of its own.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable

__all__ = ["ThreadLauncher"]


class ThreadLauncher:
    """Runs thread-starting callables, in order, on a launcher thread.

    The launcher thread exists only while there is work: :meth:`submit` starts it when it is
    not running (the one ``Thread.start()`` a burst costs its caller), and it ends once it has
    waited ``idle_s`` with nothing to do, or at once after :meth:`close` when nothing is left.
    Every submitted callable runs exactly once, also after :meth:`close`; a callable must not
    raise (its own failure is its own to report). If the launcher thread itself cannot be
    started, :meth:`submit` runs the callables on the caller's thread.
    """

    def __init__(self, *, name: str, idle_s: float = 0.05) -> None:
        self._name = name
        self._idle_s = idle_s
        self._cond = threading.Condition()
        self._pending: deque[Callable[[], None]] = deque()
        self._thread: threading.Thread | None = None
        # The thread that last stopped serving: it is still alive while it tears down.
        self._retired: threading.Thread | None = None
        self._closed = False

    def submit(self, start: Callable[[], None]) -> None:
        with self._cond:
            self._pending.append(start)
            if self._thread is not None:
                self._cond.notify()
                return
            thread = self._thread = threading.Thread(target=self._serve, name=self._name,
                                                     daemon=True)
        try:
            thread.start()
        except Exception:  # noqa: BLE001 - no thread to spare: start them here instead
            with self._cond:
                self._thread = None
                todo = list(self._pending)
                self._pending.clear()
            for item in todo:
                item()

    def close(self) -> None:
        """Let the launcher thread end as soon as nothing is left to start."""
        with self._cond:
            self._closed = True
            self._cond.notify()

    def alive(self) -> bool:
        """True while the launcher thread runs (or is being started), until it has ended."""
        with self._cond:
            retired = self._retired
            return self._thread is not None or (retired is not None and retired.is_alive())

    def _serve(self) -> None:
        while True:
            with self._cond:
                if not self._pending and not self._closed:
                    self._cond.wait(self._idle_s)
                if not self._pending:
                    self._retired, self._thread = self._thread, None
                    return
                start = self._pending.popleft()
            start()

"""Warm sandbox processes, started ahead of time; each is handed to exactly one run.

Starting a sandbox process (interpreter, imports, confinement, QuickJS context) costs about a
tenth of a second of CPU, so the pool keeps ``size`` of them waiting. A process taken from the
pool serves one run and is then discarded; the pool refills in the background. A pooled
process that died while waiting is reaped and skipped, never handed out.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable

import anyio
from anyio.abc import TaskGroup

from .process import SandboxProcess

__all__ = ["SandboxPool"]

logger = logging.getLogger("dsh_workflow.engine")


class SandboxPool:
    """Up to ``size`` idle sandbox processes, started by ``launch`` (a :class:`WarmPool`).

    :meth:`open` starts them in the engine's task group; :meth:`take` never waits (None when
    empty); :meth:`refill` starts the missing processes in the background; :meth:`close` kills
    and reaps every idle process and waits for a refill in flight, after which nothing is
    started any more.
    """

    def __init__(self, size: int, launch: Callable[[], Awaitable[SandboxProcess]]) -> None:
        self._size = size
        self._launch = launch
        self._tg: TaskGroup | None = None
        self._idle: deque[SandboxProcess] = deque()
        self._refilling = False
        self._refilled = anyio.Event()
        self._refilled.set()
        self._closed = False

    async def open(self, task_group: TaskGroup) -> None:
        """Start the processes now (returns once they are started, not yet ready: a run can
        take one at once, its script waits in the pipe until the process is)."""
        self._tg = task_group
        if self._claim_refill():
            await self._refill()

    def take(self) -> SandboxProcess | None:
        assert self._tg is not None, "take() before open()"
        while self._idle:
            process = self._idle.popleft()
            if not process.exited():
                return process
            self._tg.start_soon(process.reap)
        return None

    def idle_pids(self) -> list[int]:
        return [process.pid for process in self._idle]

    def refill(self) -> None:
        """Start the missing processes in the background (no-op while a refill runs)."""
        if len(self._idle) < self._size and self._claim_refill():
            assert self._tg is not None, "refill() before open()"
            self._tg.start_soon(self._refill, name="dsh-workflow sandbox pool refill")

    def _claim_refill(self) -> bool:
        """True, with the refill marked in flight, when one may start now."""
        if self._closed or self._refilling:
            return False
        self._refilling = True
        self._refilled = anyio.Event()
        return True

    async def _refill(self) -> None:
        try:
            while not self._closed and len(self._idle) < self._size:
                try:
                    process = await self._launch()
                except Exception:
                    logger.warning("dsh-workflow: could not start a sandbox process",
                                   exc_info=True)
                    return
                if self._closed:
                    await process.reap()
                    return
                self._idle.append(process)
        finally:
            self._refilling = False
            self._refilled.set()

    async def close(self) -> None:
        self._closed = True
        with anyio.CancelScope(shield=True):
            await self._refilled.wait()
            while self._idle:
                await self._idle.popleft().reap()

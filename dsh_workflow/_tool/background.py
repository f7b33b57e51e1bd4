"""Background runs of the ``workflow`` tool (docs/embedding.md, "The model-facing tool"): start now,
deliver the result later.

:class:`BackgroundRuns` keeps the runs a background :class:`~dsh_workflow.WorkflowTool` started:
their live status (from the engine's events), their cancellation, and the delivery of each
one's completion — the same :class:`~dsh_workflow.ToolResult` a foreground call would have
returned — to ``tool.completions()`` and to the ``on_complete`` callback, exactly once each.

Who waits for the runs, so that no completion is ever lost:

* a tool entered with ``async with`` waits in a task group of its own;
* a tool that was not entered waits in the engine's task group
  (:meth:`WorkflowEngine.start_soon`), so ``on_complete`` is called as runs end all the same;
* over an engine without ``start_soon``, a tool that was not entered delivers completions
  while the harness iterates ``completions()``; with an ``on_complete`` it refuses to start
  (:meth:`BackgroundRuns.add` returns False) rather than leave the callback uncalled.

A delivered completion is not kept: without ``on_complete``, ``completions()`` is its only
way out and it waits there until taken; with ``on_complete``, only the latest
``max_runs`` are also kept for ``completions()``. An ``on_complete`` that raises is logged
(WARNING, ``dsh_workflow.tool``) and changes nothing else. Every run is disposed once
delivered, a run still going when the tool's block ends is cancelled and disposed, and nothing
outlives the engine.

Retention: a delivered run's status is kept as its final data (a few hundred bytes, not the
live tally) for the latest ``kept_statuses`` delivered runs only (:data:`KEPT_STATUSES` by
default); an older one is dropped, and ``status()`` no longer knows it.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
from anyio.abc import TaskGroup

from .._events import WorkflowEnded, WorkflowEvent
from .._run import WorkflowRun
from .._tally import RunTally

__all__ = ["KEPT_STATUSES", "BackgroundRuns", "BackgroundStatus", "OnComplete"]

OnComplete = Callable[[Any], "Awaitable[object] | object"]
#: ``WorkflowEngine.start_soon``: run a task in the engine's task group; False when it cannot.
StartSoon = Callable[..., bool]

logger = logging.getLogger("dsh_workflow.tool")

#: How many delivered runs' statuses a tool keeps by default for ``status(run_id)`` (the latest).
KEPT_STATUSES = 100
#: How long an async ``on_complete`` may take, shielded from the closing of the tool or engine.
ON_COMPLETE_GRACE_S = 30.0


@dataclass(eq=False)
class BackgroundStatus:
    """What ``tool.status(run_id)`` reports about one background run: its counts so far."""

    run_id: str
    name: str
    tally: RunTally = field(default_factory=RunTally)

    def as_data(self) -> dict[str, Any]:
        """The status as data: ``state`` is ``running`` until the run's end, then its stop
        reason, with ``error_code`` set once it ended without completing; ``agents_done`` counts
        completed children, ``agents_failed`` the failed ones and ``agents_cancelled`` those the
        run's stop cancelled; ``cost_usd`` is the known costs' sum (None: none known) and
        ``agents_unpriced`` the children whose cost is unknown."""
        tally = self.tally
        ended = tally.ended
        return {"run_id": self.run_id, "name": self.name,
                "state": ended.stop_reason if ended is not None else "running",
                "phase": tally.phase, "agents_running": len(tally.running),
                "agents_done": tally.outcomes["completed"],
                "agents_failed": tally.failed, "agents_cancelled": tally.cancelled,
                "agents_replayed": tally.replayed, "tokens": tally.tokens,
                "cost_usd": tally.cost_usd, "agents_unpriced": tally.unpriced,
                "elapsed_s": round(tally.elapsed(), 3),
                "error_code": None if ended is None or ended.error_code is None
                else ended.error_code.value}


@dataclass
class _Tracked:
    run: WorkflowRun
    status: BackgroundStatus
    ended: bool = False  # WorkflowEnded seen
    claimed: bool = False  # someone is delivering it


class BackgroundRuns:
    """The background runs of one tool (see the module docstring)."""

    def __init__(self, *, max_runs: int, describe: Callable[[WorkflowRun, Any], Awaitable[Any]],
                 on_complete: OnComplete | None, start_soon: StartSoon | None = None,
                 kept_statuses: int = KEPT_STATUSES) -> None:
        self.max_runs = max_runs
        self.kept_statuses = kept_statuses
        self._describe = describe
        self._on_complete = on_complete
        self._start_soon = start_soon
        self._runs: dict[str, _Tracked] = {}
        # final status data of delivered runs, oldest first, at most kept_statuses of them
        self._finished: dict[str, dict[str, Any]] = {}
        # completions not yet taken through completions(); with on_complete they have been
        # delivered already, so only the latest few are kept for a later iterator
        self._delivered: deque[Any] = deque(maxlen=None if on_complete is None else max_runs)
        self._changed: anyio.Event | None = None
        self._tg: TaskGroup | None = None

    # ---- lifecycle ----------------------------------------------------------------------------

    def attach(self, task_group: TaskGroup | None) -> None:
        """Wait for runs in ``task_group`` from now on (None: only while iterating)."""
        self._tg = task_group

    async def close(self) -> None:
        """Cancel and dispose every run not yet delivered (the tool's block is ending)."""
        with anyio.CancelScope(shield=True):
            for tracked in list(self._runs.values()):
                tracked.run.cancel("the workflow tool was closed")
            for tracked in list(self._runs.values()):
                await tracked.run.dispose()
            self._runs.clear()

    # ---- runs ---------------------------------------------------------------------------------

    @property
    def running(self) -> int:
        return sum(1 for tracked in self._runs.values() if not tracked.ended)

    @property
    def has_on_complete(self) -> bool:
        return self._on_complete is not None

    @property
    def entered(self) -> bool:
        """Whether the tool's own task group waits for the runs."""
        return self._tg is not None

    def add(self, run: WorkflowRun) -> bool:
        """Track ``run`` and arrange the delivery of its completion. False (and ``run`` not
        tracked) when nothing would call ``on_complete`` for it: the tool was not entered and
        the engine cannot run the delivery in its task group."""
        tracked = _Tracked(run=run, status=BackgroundStatus(run_id=run.id, name=run.meta.name))
        self._runs[run.id] = tracked
        name = f"dsh-workflow background {run.id}"
        tracked.claimed = True
        if self._tg is not None:
            self._tg.start_soon(self._deliver, run.id, name=name)
            return True
        if self._start_soon is not None and self._start_soon(
                functools.partial(self._deliver, run.id), name=name):
            return True
        tracked.claimed = False
        if self._on_complete is None:
            return True  # delivered while the harness iterates completions()
        self._runs.pop(run.id, None)
        return False

    def status(self, run_id: str) -> dict[str, Any] | None:
        """The status data of ``run_id`` (:meth:`BackgroundStatus.as_data`); None when this tool
        never started it, or it was delivered and its status is no longer kept."""
        tracked = self._runs.get(run_id)
        if tracked is not None:
            return tracked.status.as_data()
        return self._finished.get(run_id)

    def cancel(self, run_id: str) -> bool:
        tracked = self._runs.get(run_id)
        if tracked is None or tracked.ended:
            return False
        tracked.run.cancel("cancelled with workflow_cancel")
        return True

    def on_event(self, event: WorkflowEvent) -> None:
        """The engine listener: keeps each run's status current."""
        tracked = self._runs.get(event.run.id)
        if tracked is None:
            return
        tracked.status.tally.record(event)
        if isinstance(event, WorkflowEnded):
            tracked.ended = True
            self._wake()

    # ---- delivery -----------------------------------------------------------------------------

    def completions(self) -> AsyncIterator[Any]:
        """Each background run's completion, as its run ends, each exactly once. A plain
        iterator object (not an async generator), so breaking out of it leaves nothing to
        finalize."""
        return _Completions(self)

    async def next_completion(self) -> Any:
        while True:
            if self._delivered:
                return self._delivered.popleft()
            if self._tg is None:
                ready = next((run_id for run_id, t in self._runs.items()
                              if t.ended and not t.claimed), None)
                if ready is not None:
                    self._claim(ready)
                    await self._deliver(ready)
                    continue
            self._changed = anyio.Event()
            await self._changed.wait()

    def _claim(self, run_id: str) -> None:
        self._runs[run_id].claimed = True

    async def _deliver(self, run_id: str) -> None:
        tracked = self._runs[run_id]
        try:
            result = await tracked.run.result()
        finally:
            with anyio.CancelScope(shield=True):
                await tracked.run.dispose()
        with anyio.CancelScope(shield=True):  # the run is over: its completion is not lost
            completion = await self._describe(tracked.run, result)
        self._delivered.append(completion)
        self._runs.pop(run_id, None)
        self._finished[run_id] = tracked.status.as_data()
        while len(self._finished) > self.kept_statuses:
            self._finished.pop(next(iter(self._finished)))
        self._wake()
        if self._on_complete is not None:
            await self._call_on_complete(run_id, completion)

    async def _call_on_complete(self, run_id: str, completion: Any) -> None:
        """Hand ``completion`` to ``on_complete``; what it raises is logged, nothing more.

        Shielded for up to :data:`ON_COMPLETE_GRACE_S`: the completions of runs cancelled by
        the tool's (or the engine's) block ending are delivered while it closes, and an async
        callback is not cancelled half-way by that; one still running after the grace is
        cancelled and logged."""
        assert self._on_complete is not None
        with anyio.move_on_after(ON_COMPLETE_GRACE_S, shield=True) as bounded:
            try:
                returned = self._on_complete(completion)
                if inspect.isawaitable(returned):
                    await returned
            except Exception:
                logger.warning("workflow tool: on_complete raised for background run %s",
                               run_id, exc_info=True)
        if bounded.cancelled_caught:
            logger.warning("workflow tool: on_complete for background run %s did not finish "
                           "within %g s and was cancelled", run_id, ON_COMPLETE_GRACE_S)

    def _wake(self) -> None:
        if self._changed is not None:
            self._changed.set()


class _Completions:
    """``async for completion in tool.completions()``: never ends by itself."""

    def __init__(self, runs: BackgroundRuns) -> None:
        self._runs = runs

    def __aiter__(self) -> _Completions:
        return self

    async def __anext__(self) -> Any:
        return await self._runs.next_completion()

"""The lifecycle every engine shares: construction checks, ``async with``, ``start()`` and the
drive of each run.

:class:`EngineBase` owns the engine's state (:class:`~.admission.EngineState`), its task group,
its store, its live runs and the order of ``start()``: admission, the hosted run, its runtime,
``WorkflowStarted``, the drive task. An engine supplies what differs:

* a warm pool (:class:`WarmPool`): what it prepares ahead of time for the next run;
* :meth:`EngineBase._new_runtime`: the runtime of one admitted run, attached to it;
* :meth:`EngineBase._serve`: what runs beside the run's drive (if anything) and what the drive
  waits for after the run settled;
* :meth:`EngineBase._wait_released`: how leaving the block waits for runtimes to be released.
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Awaitable, Callable
from types import TracebackType
from typing import Any, ClassVar, Generic, Protocol, Self, TypeVar

import anyio
from anyio.abc import TaskGroup

from .._agents import AgentRegistry
from .._config import EngineConfig
from .._events import EventHub, RunInfo, WorkflowStarted
from .._library import WorkflowLibrary
from .._prices import load_async
from .._questions import AnswerProvider
from .._request import WorkflowStartRequest
from .._run import WorkflowEngine, WorkflowRun
from .._store import RunStore
from .._subagent import SubagentProvider
from .admission import (
    Admission,
    EngineState,
    admit,
    check_agents,
    check_answers,
    check_library,
    hosted_run,
)
from .handle import RunHandle
from .host.control import control_poll
from .host.faults import RetryGates
from .host.host import HostedRun
from .host.journal import EngineStore

__all__ = ["EngineBase", "WarmPool"]

logger = logging.getLogger("dsh_workflow.engine")

T_co = TypeVar("T_co", covariant=True)
R = TypeVar("R")


class WarmPool(Protocol[T_co]):
    """What an engine prepares ahead of time; each item is handed to exactly one run."""

    async def open(self, task_group: TaskGroup) -> None:
        """Start preparing items (inside the engine's block; the pool may start tasks in
        ``task_group``). A raise leaves the engine's block unentered."""

    def take(self) -> T_co | None:
        """A prepared item, never waiting; None when the run must prepare its own."""

    def refill(self) -> None:
        """Prepare the missing items, without waiting for them; a no-op once closed."""

    async def close(self) -> None:
        """Release every idle item; afterwards nothing is prepared any more."""


class EngineBase(WorkflowEngine, Generic[R]):
    """A :class:`WorkflowEngine` whose runs are :class:`HostedRun` objects driven by runtimes
    of type ``R``; see the module docstring for what a subclass supplies.

    Subclasses set ``_engine_name`` (the name the engine's error texts use) and create
    ``self._pool`` after calling ``__init__``.
    """

    _engine_name: ClassVar[str]
    #: The runtime starts from ``start()`` when the run has no journal to load first, so the
    #: script begins at once instead of after the drive task's first turn.
    _launch_at_start: ClassVar[bool] = False
    _pool: WarmPool[Any]

    def __init__(self, config: EngineConfig | None, *, provider: SubagentProvider,
                 agents: AgentRegistry | None, store: RunStore | None,
                 library: WorkflowLibrary | None, answers: AnswerProvider | None = None,
                 park: bool = False) -> None:
        self.config = config if config is not None else EngineConfig()
        if not isinstance(self.config, EngineConfig):
            raise TypeError("config must be an EngineConfig")
        if not callable(getattr(provider, "run", None)):
            raise TypeError("provider must be a SubagentProvider with an async run(request)")
        self.provider = provider
        self.agents = check_agents(agents)
        self.library = check_library(library)
        #: Who answers the runs' questions (docs/embedding.md, "Questions"): ``answers`` as
        #: they arise; ``park``: a run waiting on nothing but questions nobody answers parks.
        self.answers = check_answers(answers)
        if not isinstance(park, bool):
            raise TypeError("park must be True or False")
        self.park = park
        self.store = store
        self._store = EngineStore(store) if store is not None else None
        self.events = EventHub()
        self._state = EngineState.UNOPENED
        self._runs: dict[HostedRun, R] = {}
        self._retry_gates = RetryGates()  # one pause per provider identity, for all its runs
        self._drives_done = anyio.Event()  # set while no run's drive task is alive
        self._drives_done.set()
        self._tg: TaskGroup | None = None

    # ---- what an engine supplies ----------------------------------------------------------

    def _prepare(self) -> None:
        """Called first on entering the block, before the store; a raise leaves the engine
        unopened. Nothing by default."""

    @abc.abstractmethod
    def _new_runtime(self, admission: Admission, run: HostedRun) -> R:
        """The runtime of ``run`` (taking a prepared item from the pool when there is one),
        attached to ``run`` and not yet started. Called from ``start()``."""

    @abc.abstractmethod
    async def _serve(self, run: HostedRun, runtime: R) -> None:
        """The body of the run's drive task; it must call :meth:`_drive_to_end` once."""

    @abc.abstractmethod
    async def _wait_released(self) -> None:
        """On leaving the block, after every run was disposed: wait (bounded) until the
        runtimes have released what they hold."""

    # ---- lifecycle ------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        if self._state is not EngineState.UNOPENED:
            raise RuntimeError(f"a {self._engine_name} can be entered only once")
        self._prepare()
        if self.config.budget_usd is not None:
            # start() checks that the default models have prices: the data loads off the loop
            await load_async()
        if self._store is not None:
            await self._store.enter()
            self.events.subscribe(self._store.recorder)
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg = tg
        self._state = EngineState.OPEN
        if self._store is not None:  # cancel requests from other processes, long calls' rows
            tg.start_soon(control_poll, self._store.store, self._runs.keys,
                          name="dsh-workflow control poll")
        try:
            await self._pool.open(tg)
        except BaseException:
            await self.__aexit__(None, None, None)
            raise
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> bool | None:
        self._state = EngineState.CLOSED
        assert self._tg is not None
        try:
            with anyio.CancelScope(shield=True):
                await self._pool.close()
                if self._runs:
                    async with anyio.create_task_group() as tg:
                        for run in list(self._runs):
                            tg.start_soon(run.dispose)
                await self._wait_released()
        finally:
            self._tg.cancel_scope.cancel()
            # The block's own exception is not handed to the task group, so it propagates as
            # it was raised instead of wrapped in an exception group.
            await self._tg.__aexit__(None, None, None)
            if self._store is not None:
                with anyio.CancelScope(shield=True):
                    await self._store.exit()
        return None

    # ---- runs -----------------------------------------------------------------------------

    def start(self, request: WorkflowStartRequest) -> WorkflowRun:
        if self._state is not EngineState.OPEN:
            name = self._engine_name
            raise RuntimeError(
                f"{name}.start() called outside the engine's `async with` block; use "
                f"`async with {name}(...) as engine:` and start runs inside it")
        store = self._store
        admission = admit(request, default_provider=self.provider, config=self.config,
                          store=None if store is None else store.store)
        assert self._tg is not None
        run = hosted_run(admission, config=self.config, events=self.events, task_group=self._tg,
                         agents=self.agents, library=self.library, gates=self._retry_gates,
                         answers=self.answers, park=self.park,
                         recorder=None if store is None else (store.store, store.recorder))
        runtime = self._new_runtime(admission, run)
        self._runs[run] = runtime
        if self._drives_done.is_set():
            self._drives_done = anyio.Event()
        self.events.emit(WorkflowStarted(run=RunInfo(id=run.id, meta=admission.meta)))
        if self._launch_at_start and run.journal is None:
            # A durable run starts once its drive task has recorded it.
            run.launch()
        self._tg.start_soon(self._drive, run, runtime, name=f"dsh-workflow run {run.id}")
        return RunHandle(run)

    def start_soon(self, func: Callable[[], Awaitable[object]], *, name: str) -> bool:
        if self._state is not EngineState.OPEN or self._tg is None:
            return False
        self._tg.start_soon(_contained, func, name, name=name)
        return True

    async def _drive(self, run: HostedRun, runtime: R) -> None:
        try:
            await self._serve(run, runtime)
        finally:
            self._runs.pop(run, None)
            if self._store is not None:
                self._store.recorder.journals.pop(run.id, None)
            if not self._runs:
                self._drives_done.set()

    async def _drive_to_end(self, run: HostedRun) -> None:
        """Drive ``run`` until its result is settled and recorded, then refill the pool."""
        try:
            await run.drive()
        finally:
            await run.record_end()
        # Preparing a runtime costs CPU (and, in-process, holds the GIL for much of it), so the
        # pool is refilled once the run has settled and its waiters have had their turn.
        await anyio.lowlevel.checkpoint()
        self._pool.refill()


async def _contained(func: Callable[[], Awaitable[object]], name: str) -> None:
    """Run a task handed to ``start_soon``: its exception is logged, so it never cancels the
    engine's task group (and with it every run)."""
    try:
        await func()
    except Exception:
        logger.exception("workflow engine: task %r raised", name)

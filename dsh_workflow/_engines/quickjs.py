"""``QuickJSEngine``: the in-process reference engine.

Each run gets its own QuickJS context on its own OS thread (created, used and released there);
the event loop never runs script code, so a spinning script cannot block it. The host side of
every run (hooks, caps, children, events) is :class:`~dsh_workflow._engines.host.HostedRun`
and the pieces it delegates to.
"""

from __future__ import annotations

import weakref
from collections import deque
from types import TracebackType

import anyio
from anyio.abc import TaskGroup

from .._agents import AgentRegistry
from .._config import EngineConfig
from .._events import EventHub, RunInfo, WorkflowStarted
from .._request import WorkflowStartRequest
from .._run import WorkflowEngine, WorkflowRun
from .._store import RunStore
from .._library import WorkflowLibrary
from .._subagent import SubagentProvider
from .admission import EngineState, admit, check_agents, check_library, hosted_run
from .host import HostedRun
from .journal import EngineStore
from .launcher import ThreadLauncher
from .loop import LoopHandle
from .runtime import RuntimeThread

__all__ = ["QuickJSEngine"]


class _WarmPool:
    """Runtime threads prepared ahead of time; each is handed to exactly one run.

    Preparing a runtime (a QuickJS context with the runtime loaded) costs one to two milliseconds
    of CPU, so the pool does it on idle threads before a run needs one. A thread never serves
    a second run, so nothing carries over between runs. Threads are started by a
    :class:`ThreadLauncher`, so neither ``start()`` nor a refill waits for a thread to boot.
    """

    def __init__(self, config: EngineConfig) -> None:
        self._config = config
        self._idle: deque[RuntimeThread] = deque()
        self._all: weakref.WeakSet[RuntimeThread] = weakref.WeakSet()
        self._launcher = ThreadLauncher(name="dsh-workflow-launcher", idle_s=0.1)
        self._count = 0
        self._closed = False

    def _new(self, *, ahead: bool) -> RuntimeThread:
        self._count += 1
        runtime = RuntimeThread(self._config, name=f"dsh-workflow-idle-{self._count}",
                                prepare_ahead=ahead)
        runtime.launch(via=self._launcher.submit)
        self._all.add(runtime)
        return runtime

    def take(self) -> RuntimeThread:
        while self._idle:
            runtime = self._idle.popleft()
            if not runtime.failed:
                return runtime
        return self._new(ahead=False)

    def refill(self) -> None:
        while not self._closed and len(self._idle) < self._config.warm_runtimes:
            self._idle.append(self._new(ahead=True))

    def close(self) -> None:
        self._closed = True
        while self._idle:
            self._idle.popleft().stop()
        self._launcher.close()

    def alive(self) -> bool:
        return self._launcher.alive() or any(runtime.is_alive() for runtime in list(self._all))


class QuickJSEngine(WorkflowEngine):
    """Runs workflows in-process, one QuickJS context and one OS thread per run.

    Use it as an async context manager; it owns the task group every run and child lives in::

        async with QuickJSEngine(EngineConfig(), provider=EchoProvider()) as engine:
            run = engine.start(WorkflowStartRequest(meta=..., script="return 1"))
            result = await run.result()
            await run.dispose()

    Leaving the block disposes every run still alive. Limits (memory, stack, CPU per stretch)
    hold for every run; a stretch already running cannot be interrupted from outside, so after
    a cancel a spinning script's thread may live on for up to ``slice_cpu_limit_s`` — it holds
    no host resources and ends by itself. Use ``SubprocessEngine`` for hostile scripts.
    """

    def __init__(self, config: EngineConfig | None = None, *,
                 provider: SubagentProvider,
                 agents: AgentRegistry | None = None, store: RunStore | None = None,
                 library: WorkflowLibrary | None = None) -> None:
        self.config = config if config is not None else EngineConfig()
        if not isinstance(self.config, EngineConfig):
            raise TypeError("config must be an EngineConfig")
        if not callable(getattr(provider, "run", None)):
            raise TypeError("provider must be a SubagentProvider with an async run(request)")
        self.provider = provider
        self.agents = check_agents(agents)
        self.library = check_library(library)
        self.store = store
        self._store = EngineStore(store) if store is not None else None
        self.events = EventHub()
        self._state = EngineState.UNOPENED
        self._runs: set[HostedRun] = set()
        self._pool = _WarmPool(self.config)
        self._tg: TaskGroup | None = None
        self._loop: LoopHandle | None = None
        self._seq = 0

    async def __aenter__(self) -> QuickJSEngine:
        if self._state is not EngineState.UNOPENED:
            raise RuntimeError("a QuickJSEngine can be entered only once")
        if self._store is not None:
            await self._store.enter()
            self.events.subscribe(self._store.recorder)
        self._loop = LoopHandle()
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg = tg
        self._pool.refill()
        self._state = EngineState.OPEN
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> bool | None:
        self._state = EngineState.CLOSED
        assert self._tg is not None
        try:
            with anyio.CancelScope(shield=True):
                await self._dispose_all()
        finally:
            self._tg.cancel_scope.cancel()
            # The block's own exception is not handed to the task group, so it propagates as
            # it was raised instead of wrapped in an exception group.
            await self._tg.__aexit__(None, None, None)
            if self._store is not None:
                with anyio.CancelScope(shield=True):
                    await self._store.exit()
        return None

    async def _dispose_all(self) -> None:
        self._pool.close()
        if self._runs:
            async with anyio.create_task_group() as tg:
                for run in list(self._runs):
                    tg.start_soon(run.dispose)
        # A runtime stuck in one CPU slice ends by itself within the slice limit: CPU seconds,
        # which take longer on a busy machine, hence the wall-clock allowance.
        with anyio.move_on_after(3 * self.config.slice_cpu_limit_s + 1.0):
            while self._pool.alive():
                await anyio.sleep(0.005)

    def start(self, request: WorkflowStartRequest) -> WorkflowRun:
        if self._state is not EngineState.OPEN:
            raise RuntimeError(
                "QuickJSEngine.start() called outside the engine's `async with` block; use "
                "`async with QuickJSEngine(...) as engine:` and start runs inside it")
        store = self._store
        admission = admit(request, default_provider=self.provider, config=self.config,
                          store=None if store is None else store.store)
        assert self._tg is not None and self._loop is not None
        loop = self._loop
        self._seq += 1
        run = hosted_run(admission, config=self.config, events=self.events, task_group=self._tg,
                         agents=self.agents, library=self.library,
                         recorder=None if store is None else (store.store, store.recorder))
        journal = run.journal
        runtime = self._pool.take()
        runtime.assign(admission.script, admission.args_text,
                       lambda kind, payload: loop.post(run.report, kind, payload),
                       name=f"dsh-workflow-run-{self._seq}",
                       exited=lambda: loop.post(run.runtime_exited),
                       budget_tokens=admission.budget_tokens,
                       numbers=None if journal is None else journal.numbers_text)
        run.attach(runtime, signals_exit=True)
        self._runs.add(run)
        self.events.emit(WorkflowStarted(run=RunInfo(id=run.id, meta=admission.meta)))
        if journal is None:
            # The script starts on its thread while the loop spawns the drive task; a durable
            # run starts once the drive task has recorded it.
            run.launch()
        self._tg.start_soon(self._drive, run, name=f"dsh-workflow run {run.id}")
        return run

    async def _drive(self, run: HostedRun) -> None:
        try:
            try:
                await run.drive()
            finally:
                await run.record_end()
            # Preparing a runtime holds the GIL for much of its millisecond, so the pool is
            # refilled once the run has settled and its waiters have had their turn.
            await anyio.lowlevel.checkpoint()
            self._pool.refill()
            await run.wait_runtime_gone()
        finally:
            self._runs.discard(run)
            if self._store is not None:
                self._store.recorder.journals.pop(run.id, None)

"""``QuickJSEngine``: the in-process reference engine.

Each run gets its own QuickJS context on its own OS thread (created, used and released there);
the event loop never runs script code, so a spinning script cannot block it. The host side of
every run (hooks, caps, children, events) is :class:`~dsh_workflow._engines.host.host.HostedRun`
and the pieces it delegates to.
"""

from __future__ import annotations

from collections import deque

import anyio
from anyio.abc import TaskGroup

from .._agents import AgentRegistry
from .._config import EngineConfig
from .._library import WorkflowLibrary
from .._loop import LoopHandle
from .._questions import AnswerProvider
from .._store import RunStore
from .._subagent import SubagentProvider
from .admission import Admission
from .base import EngineBase
from .host.host import HostedRun
from .launcher import ThreadLauncher
from .script.limits import RuntimeLimits
from .script.thread import ThreadRuntime

__all__ = ["QuickJSEngine"]


class _WarmPool:
    """Runtime threads prepared ahead of time (a :class:`WarmPool`); each is handed to exactly
    one run.

    Preparing a runtime (a QuickJS context with the runtime loaded) costs one to two milliseconds
    of CPU, so the pool does it on idle threads before a run needs one. A thread never serves
    a second run, so nothing carries over between runs. Threads are started by a
    :class:`ThreadLauncher`, so neither ``start()`` nor a refill waits for a thread to boot.
    """

    def __init__(self, config: EngineConfig) -> None:
        self._config = config
        self._limits = RuntimeLimits.of(config)
        self._idle: deque[ThreadRuntime] = deque()
        # Held strongly until their threads have ended: a runtime nothing else holds any more
        # can still have a live thread (it is tearing down), and the engine must wait for it.
        self._all: set[ThreadRuntime] = set()
        self._launcher = ThreadLauncher(name="dsh-workflow-launcher", idle_s=0.1)
        self._count = 0
        self._closed = False

    def _new(self, *, ahead: bool) -> ThreadRuntime:
        self._count += 1
        runtime = ThreadRuntime(self._limits, name=f"dsh-workflow-idle-{self._count}",
                                prepare_ahead=ahead)
        runtime.launch(via=self._launcher.submit)
        self._prune()
        self._all.add(runtime)
        return runtime

    def _prune(self) -> None:
        self._all = {runtime for runtime in self._all if runtime.is_alive()}

    async def open(self, task_group: TaskGroup) -> None:
        self.refill()

    def take(self) -> ThreadRuntime:
        while self._idle:
            runtime = self._idle.popleft()
            if not runtime.failed:
                return runtime
        return self._new(ahead=False)

    def refill(self) -> None:
        while not self._closed and len(self._idle) < self._config.warm_runtimes:
            self._idle.append(self._new(ahead=True))

    async def close(self) -> None:
        self._closed = True
        while self._idle:
            self._idle.popleft().stop()
        self._launcher.close()

    def alive(self) -> bool:
        """True while the launcher or any runtime thread this pool made is alive."""
        self._prune()
        return self._launcher.alive() or bool(self._all)


class QuickJSEngine(EngineBase[ThreadRuntime]):
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

    _engine_name = "QuickJSEngine"
    _launch_at_start = True

    def __init__(self, config: EngineConfig | None = None, *,
                 provider: SubagentProvider,
                 agents: AgentRegistry | None = None, store: RunStore | None = None,
                 library: WorkflowLibrary | None = None,
                 answers: AnswerProvider | None = None, park: bool = False) -> None:
        super().__init__(config, provider=provider, agents=agents, store=store,
                         library=library, answers=answers, park=park)
        self._pool: _WarmPool = _WarmPool(self.config)
        self._loop: LoopHandle | None = None
        self._seq = 0

    def _prepare(self) -> None:
        self._loop = LoopHandle()

    def _new_runtime(self, admission: Admission, run: HostedRun) -> ThreadRuntime:
        assert self._loop is not None
        loop = self._loop
        self._seq += 1
        journal = run.journal
        runtime = self._pool.take()
        runtime.assign(admission.script, admission.args_text,
                       lambda kind, payload: loop.post(run.report, kind, payload),
                       name=f"dsh-workflow-run-{self._seq}",
                       exited=lambda: loop.post(run.runtime_exited),
                       budget_tokens=admission.budget_tokens, budget_usd=run.budget_usd,
                       numbers=None if journal is None else journal.numbers_text)
        run.attach(runtime, signals_exit=True)
        return runtime

    async def _serve(self, run: HostedRun, runtime: ThreadRuntime) -> None:
        await self._drive_to_end(run)
        await run.wait_runtime_gone()

    async def _wait_released(self) -> None:
        # A runtime stuck in one CPU slice ends by itself within the slice limit: CPU seconds,
        # which take longer on a busy machine, hence the wall-clock allowance.
        with anyio.move_on_after(3 * self.config.slice_cpu_limit_s + 1.0):
            # A thread's exit sets no Event the loop could wait on: it is polled, within the
            # bounded wait above.
            while self._pool.alive():  # noqa: ASYNC110 - see above
                await anyio.sleep(0.005)

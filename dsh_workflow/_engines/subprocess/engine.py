"""``SubprocessEngine``: each run's script in its own locked-down sandbox process.

The script side of a run (QuickJS context, hooks, limits) is the same runtime the in-process
``QuickJSEngine`` uses, run by ``child.py`` inside a process confined as ``sandbox.py``
describes. The host side (hook rules, caps, children, events, cancellation, the result) is the
same :class:`~dsh_workflow._engines.host.HostedRun`, on the event loop: the provider never
enters the sandbox, ``agent()`` calls and their answers cross the pipe protocol of
``protocol.py``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from types import TracebackType

import anyio
from anyio.abc import TaskGroup

from ..._agents import AgentRegistry
from ..._config import EngineConfig
from ..._events import EventHub, RunInfo, WorkflowStarted
from ..._request import WorkflowStartRequest
from ..._run import WorkflowEngine, WorkflowRun
from ..._store import RunStore
from ..._library import WorkflowLibrary
from ..._subagent import SubagentProvider
from ..admission import EngineState, admit, check_agents, check_library, hosted_run
from ..host import HostedRun
from ..journal import EngineStore
from . import sandbox
from .pool import SandboxPool
from .process import ProcessRuntime, SandboxProcess, start_sandbox
from .sandbox import SandboxPolicy

__all__ = ["SubprocessEngine"]


class SubprocessEngine(WorkflowEngine):
    """Runs each workflow in its own sandbox process (one process per run, never reused).

    Use it exactly like ``QuickJSEngine``::

        async with SubprocessEngine(EngineConfig(), provider=EchoProvider()) as engine:
            run = engine.start(WorkflowStartRequest(meta=..., script="return 1"))
            result = await run.result()
            await run.dispose()

    ``pool_size`` processes are kept started and confined ahead of time. ``policy`` tunes the
    sandbox (see :class:`~dsh_workflow._engines.subprocess.sandbox.SandboxPolicy`). Leaving the
    block disposes every run and kills and reaps every process, pooled or running. POSIX only;
    the confinement described in ``sandbox.py`` is complete on Linux.
    """

    def __init__(self, config: EngineConfig | None = None, *, provider: SubagentProvider,
                 pool_size: int = 2, policy: SandboxPolicy | None = None,
                 agents: AgentRegistry | None = None, store: RunStore | None = None,
                 library: WorkflowLibrary | None = None) -> None:
        self.config = config if config is not None else EngineConfig()
        if not isinstance(self.config, EngineConfig):
            raise TypeError("config must be an EngineConfig")
        if not callable(getattr(provider, "run", None)):
            raise TypeError("provider must be a SubagentProvider with an async run(request)")
        if type(pool_size) is not int or pool_size < 0:
            raise ValueError("pool_size must be a non-negative integer")
        if sys.platform == "win32":  # pragma: no cover
            raise RuntimeError("SubprocessEngine needs a POSIX system")
        self.provider = provider
        self.agents = check_agents(agents)
        self.library = check_library(library)
        self.store = store
        self._store = EngineStore(store) if store is not None else None
        self.pool_size = pool_size
        self.policy = policy if policy is not None else SandboxPolicy()
        if not isinstance(self.policy, SandboxPolicy):
            raise TypeError("policy must be a SandboxPolicy")
        self.events = EventHub()
        self._state = EngineState.UNOPENED
        self._runs: dict[HostedRun, ProcessRuntime] = {}
        self._tg: TaskGroup | None = None
        self._pool: SandboxPool | None = None
        self._argv: list[str] = []
        self._idle_drives = anyio.Event()
        self._idle_drives.set()

    # ---- lifecycle ------------------------------------------------------------------------

    async def __aenter__(self) -> SubprocessEngine:
        if self._state is not EngineState.UNOPENED:
            raise RuntimeError("a SubprocessEngine can be entered only once")
        self._argv = list(self._sandbox_command())
        if self._store is not None:
            await self._store.enter()
            self.events.subscribe(self._store.recorder)
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg = tg
        self._pool = SandboxPool(self.pool_size, self._launch, tg)
        self._state = EngineState.OPEN
        try:
            await self._pool.fill()
        except BaseException:
            await self.__aexit__(None, None, None)
            raise
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> bool | None:
        self._state = EngineState.CLOSED
        assert self._tg is not None and self._pool is not None
        try:
            with anyio.CancelScope(shield=True):
                await self._pool.close()
                if self._runs:
                    async with anyio.create_task_group() as tg:
                        for run in list(self._runs):
                            tg.start_soon(run.dispose)
                # Every process is killed within the stop grace; wait until all are reaped.
                with anyio.move_on_after(self.config.dispose_grace_s + 5.0):
                    await self._idle_drives.wait()
        finally:
            self._tg.cancel_scope.cancel()
            # The block's own exception is not handed to the task group, so it propagates as
            # it was raised instead of wrapped in an exception group.
            await self._tg.__aexit__(None, None, None)
            if self._store is not None:
                with anyio.CancelScope(shield=True):
                    await self._store.exit()
        return None

    def _sandbox_command(self) -> Sequence[str]:
        """The argv of every sandbox process (a seam for tests that need a faulty child)."""
        spec = sandbox.child_spec(self.config.model_dump(mode="json"), self.policy)
        return sandbox.command(spec)

    async def _launch(self) -> SandboxProcess:
        return await start_sandbox(self._argv)

    # ---- runs -----------------------------------------------------------------------------

    def start(self, request: WorkflowStartRequest) -> WorkflowRun:
        if self._state is not EngineState.OPEN:
            raise RuntimeError(
                "SubprocessEngine.start() called outside the engine's `async with` block; use "
                "`async with SubprocessEngine(...) as engine:` and start runs inside it")
        store = self._store
        admission = admit(request, default_provider=self.provider, config=self.config,
                          store=None if store is None else store.store)
        assert self._tg is not None and self._pool is not None
        run = hosted_run(admission, config=self.config, events=self.events, task_group=self._tg,
                         agents=self.agents, library=self.library,
                         recorder=None if store is None else (store.store, store.recorder))
        journal = run.journal
        runtime = ProcessRuntime(body=admission.script, args_text=admission.args_text,
                                 config=self.config, policy=self.policy,
                                 process=self._pool.take(), launch=self._launch,
                                 budget_tokens=admission.budget_tokens,
                                 numbers=None if journal is None else journal.numbers_text)
        run.attach(runtime)
        self._runs[run] = runtime
        self._idle_drives = anyio.Event()
        self.events.emit(WorkflowStarted(run=RunInfo(id=run.id, meta=admission.meta)))
        self._tg.start_soon(self._drive, run, runtime, name=f"dsh-workflow run {run.id}")
        return run

    async def _drive(self, run: HostedRun, runtime: ProcessRuntime) -> None:
        try:
            async with anyio.create_task_group() as tg:
                tg.start_soon(runtime.serve, run, name=f"dsh-workflow sandbox {run.id}")
                try:
                    await run.drive()
                finally:
                    await run.record_end()
                await anyio.lowlevel.checkpoint()
                assert self._pool is not None
                self._pool.refill()
        finally:
            self._runs.pop(run, None)
            if self._store is not None:
                self._store.recorder.journals.pop(run.id, None)
            if not self._runs:
                self._idle_drives.set()

    # ---- diagnostics ----------------------------------------------------------------------

    def sandbox_pid(self, run: WorkflowRun) -> int | None:
        """The pid of the process running ``run``, while it exists (for monitoring and tests)."""
        runtime = self._runs.get(run)  # type: ignore[call-overload]
        return runtime.pid if runtime is not None else None

    def pooled_pids(self) -> list[int]:
        """The pids of the warm processes waiting in the pool."""
        return self._pool.idle_pids() if self._pool is not None else []

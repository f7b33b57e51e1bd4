"""``SubprocessEngine``: each run's script in its own locked-down sandbox process.

The script side of a run (QuickJS context, hooks, limits) is the same runtime the in-process
``QuickJSEngine`` uses, run by ``child.py`` inside a process confined as ``sandbox.py``
describes. The host side (hook rules, caps, children, events, cancellation, the result) is the
same :class:`~dsh_workflow._engines.host.host.HostedRun`, on the event loop: the provider never
enters the sandbox, ``agent()`` calls and their answers cross the pipe as the frames of
``frames.py``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

import anyio

from ..._agents import AgentRegistry
from ..._config import EngineConfig
from ..._library import WorkflowLibrary
from ..._questions import AnswerProvider
from ..._run import WorkflowRun
from ..._store import RunStore
from ..._subagent import SubagentProvider
from ..admission import Admission
from ..base import EngineBase
from ..handle import hosted_run_of
from ..host.host import HostedRun
from . import sandbox
from .pool import SandboxPool
from .process import ProcessRuntime, SandboxProcess, start_sandbox
from .sandbox import SandboxPolicy

__all__ = ["SubprocessEngine"]


class SubprocessEngine(EngineBase[ProcessRuntime]):
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

    _engine_name = "SubprocessEngine"

    def __init__(self, config: EngineConfig | None = None, *, provider: SubagentProvider,
                 pool_size: int = 2, policy: SandboxPolicy | None = None,
                 agents: AgentRegistry | None = None, store: RunStore | None = None,
                 library: WorkflowLibrary | None = None,
                 answers: AnswerProvider | None = None, park: bool = False) -> None:
        super().__init__(config, provider=provider, agents=agents, store=store,
                         library=library, answers=answers, park=park)
        if type(pool_size) is not int or pool_size < 0:
            raise ValueError("pool_size must be a non-negative integer")
        if sys.platform == "win32":  # pragma: no cover
            raise RuntimeError("SubprocessEngine needs a POSIX system")
        self.pool_size = pool_size
        self.policy = policy if policy is not None else SandboxPolicy()
        if not isinstance(self.policy, SandboxPolicy):
            raise TypeError("policy must be a SandboxPolicy")
        self._pool: SandboxPool = SandboxPool(pool_size, self._launch)
        self._argv: list[str] = []

    # ---- the engine's parts ---------------------------------------------------------------

    def _prepare(self) -> None:
        self._argv = list(self._sandbox_command())

    def _sandbox_command(self) -> Sequence[str]:
        """The argv of every sandbox process (a seam for tests that need a faulty child)."""
        spec = sandbox.child_spec(self.config.model_dump(mode="json"), self.policy)
        return sandbox.command(spec)

    async def _launch(self) -> SandboxProcess:
        return await start_sandbox(self._argv)

    def _new_runtime(self, admission: Admission, run: HostedRun) -> ProcessRuntime:
        journal = run.journal
        runtime = ProcessRuntime(body=admission.script, args_text=admission.args_text,
                                 config=self.config, policy=self.policy,
                                 process=self._pool.take(), launch=self._launch,
                                 budget_tokens=admission.budget_tokens,
                                 budget_usd=run.budget_usd,
                                 numbers=None if journal is None else journal.numbers_text)
        run.attach(runtime)
        return runtime

    async def _serve(self, run: HostedRun, runtime: ProcessRuntime) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(runtime.serve, run, name=f"dsh-workflow sandbox {run.id}")
            await self._drive_to_end(run)

    async def _wait_released(self) -> None:
        # Every process is killed within the stop grace; wait until all are reaped.
        with anyio.move_on_after(self.config.dispose_grace_s + 5.0):
            await self._drives_done.wait()

    # ---- diagnostics ----------------------------------------------------------------------

    def sandbox_pid(self, run: WorkflowRun) -> int | None:
        """The pid of the process running ``run``, while it exists (for monitoring and tests)."""
        hosted = hosted_run_of(run)
        runtime = self._runs.get(hosted) if hosted is not None else None
        return runtime.pid if runtime is not None else None

    def pooled_pids(self) -> list[int]:
        """The pids of the warm processes waiting in the pool."""
        return self._pool.idle_pids()

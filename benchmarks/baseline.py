"""The baseline: each scenario's orchestration written directly in Python (no JavaScript).

It is the fastest honest way to do what the scripts do with the same provider object: one
anyio task group per run, the same ``max_concurrent_agents`` semaphore, a real
:class:`~dsh_workflow.SubagentRequest` per call and the provider's own
:class:`~dsh_workflow.SubagentResult` back. What it leaves out is exactly the engine's work:
a script runtime on its own thread, the JSON boundary, hook validation, events and caps.

It also holds the providers the blocking scenarios share between baseline and engines.
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Awaitable, Callable, Sequence
from types import TracebackType
from typing import Any, Self

import anyio
from anyio.abc import TaskGroup

from dsh_workflow import SubagentRequest, SubagentResult

__all__ = [
    "BaselineHost",
    "BaselineRun",
    "GateProvider",
    "Orchestrator",
    "fanout",
    "one_agent",
    "pipeline3",
    "sequential",
    "trivial",
]


class GateProvider:
    """A provider whose children block until :meth:`open` (or cancellation).

    ``arm()`` must be called inside the event loop before use; ``started`` counts children that
    entered ``run`` since the last ``arm()``.
    """

    def __init__(self) -> None:
        self.started = 0
        self._gate: anyio.Event | None = None

    def arm(self) -> None:
        self.started = 0
        self._gate = anyio.Event()

    def open(self) -> None:
        assert self._gate is not None
        self._gate.set()

    async def wait_started(self, count: int, timeout_s: float = 300.0) -> None:
        with anyio.fail_after(timeout_s):
            while self.started < count:  # noqa: ASYNC110 - an Event would add work to what is measured
                await anyio.sleep(0.002)

    async def run(self, request: SubagentRequest) -> SubagentResult:
        assert self._gate is not None, "GateProvider.arm() was not called"
        self.started += 1
        await self._gate.wait()
        return SubagentResult(stop_reason="completed", text="released: " + request.prompt)


class Orchestrator:
    """What one baseline run uses instead of the script hooks."""

    __slots__ = ("provider", "run_id", "seq", "slots")

    def __init__(self, provider: Any, max_concurrent_agents: int) -> None:
        self.provider = provider
        self.run_id = str(uuid.uuid4())
        self.seq = 0
        self.slots = anyio.Semaphore(max_concurrent_agents)

    async def agent(self, prompt: str) -> str | None:
        """``agent(prompt)``: one child under the concurrency cap; its text, or None."""
        self.seq += 1
        request = SubagentRequest(prompt=prompt, label=prompt[:48], run_id=self.run_id,
                                  seq=self.seq)
        async with self.slots:
            result = await self.provider.run(request)
        if result.stop_reason != "completed":
            return None
        return result.text if result.text is not None else ""

    async def parallel(self, thunks: Sequence[Callable[[], Awaitable[Any]]]) -> list[Any]:
        """``parallel(thunks)``: all at once, results in order, an ordinary raise → None."""
        out: list[Any] = [None] * len(thunks)

        async def one(index: int, thunk: Callable[[], Awaitable[Any]]) -> None:
            try:
                out[index] = await thunk()
            except Exception:  # noqa: BLE001 - mirrors parallel()'s null slot
                out[index] = None

        async with anyio.create_task_group() as tg:
            for index, thunk in enumerate(thunks):
                tg.start_soon(one, index, thunk)
        return out

    async def pipeline(self, items: Sequence[Any],
                       *stages: Callable[[Any, Any, int], Awaitable[Any]]) -> list[Any]:
        """``pipeline(items, ...stages)``: a chain per item, no barrier between stages."""
        out: list[Any] = [None] * len(items)

        async def chain(index: int, item: Any) -> None:
            prev = item
            try:
                for stage in stages:
                    prev = await stage(prev, item, index)
            except Exception:  # noqa: BLE001 - mirrors pipeline()'s null item
                prev = None
            out[index] = prev

        async with anyio.create_task_group() as tg:
            for index, item in enumerate(items):
                tg.start_soon(chain, index, item)
        return out


class BaselineRun:
    """A baseline run: a task in the host's task group, with ``result()`` and ``cancel()``."""

    def __init__(self) -> None:
        self._done = anyio.Event()
        self._scope = anyio.CancelScope()
        self.value: Any = None
        self.stop_reason = "completed"

    async def _drive(self, fn: Callable[..., Awaitable[Any]], args: tuple[Any, ...]) -> None:
        try:
            with self._scope:
                self.value = await fn(*args)
            if self._scope.cancelled_caught:
                self.stop_reason = "cancelled"
        finally:
            self._done.set()

    def cancel(self) -> None:
        self._scope.cancel()

    async def result(self) -> Any:
        await self._done.wait()
        return self.value


class BaselineHost:
    """The baseline's stand-in for an engine: owns the task group runs live in."""

    def __init__(self, provider: Any, max_concurrent_agents: int = 16) -> None:
        self.provider = provider
        self.max_concurrent_agents = max_concurrent_agents
        self._tg: TaskGroup | None = None

    async def __aenter__(self) -> Self:
        self._tg = anyio.create_task_group()
        await self._tg.__aenter__()
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> bool | None:
        assert self._tg is not None
        self._tg.cancel_scope.cancel()
        return await self._tg.__aexit__(exc_type, exc, tb)

    def start(self, orchestration: Callable[..., Awaitable[Any]], *args: Any) -> BaselineRun:
        """Start ``orchestration(orchestrator, *args)`` as a run."""
        assert self._tg is not None
        run = BaselineRun()
        orch = Orchestrator(self.provider, self.max_concurrent_agents)
        self._tg.start_soon(run._drive, orchestration, (orch, *args))
        return run


# ---- the orchestrations (the Python twins of scenarios.SCRIPTS) -----------------------------

async def trivial(o: Orchestrator) -> int:
    return 1


async def one_agent(o: Orchestrator) -> str | None:
    return await o.agent("hello")


async def fanout(o: Orchestrator, n: int) -> int:
    results = await o.parallel([functools.partial(o.agent, f"item {i}") for i in range(n)])
    return len(results)


async def sequential(o: Orchestrator, n: int) -> int:
    count = 0
    for i in range(n):
        if await o.agent(f"step {i}") is not None:
            count += 1
    return count


async def pipeline3(o: Orchestrator, n: int) -> int:
    async def a(prev: Any, item: Any, index: int) -> Any:
        return await o.agent(f"a {item}")

    async def b(prev: Any, item: Any, index: int) -> Any:
        return await o.agent(f"b {prev}")

    async def c(prev: Any, item: Any, index: int) -> Any:
        return await o.agent(f"c {prev}")

    results = await o.pipeline(list(range(n)), a, b, c)
    return len(results)

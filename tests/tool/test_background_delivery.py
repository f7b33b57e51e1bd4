"""Background runs lose nothing (SPEC §19): completions reach ``on_complete`` also when the
tool was not entered, a delivered completion is not kept, and an ``on_complete`` that raises
is logged and stops nothing else. Both engines, both backends."""

from __future__ import annotations

import contextlib
import gc
import logging
import tracemalloc
from types import TracebackType
from typing import Any, Self

import anyio
import anyio.lowlevel
import pytest
from _support import await_until, both_engines, quickjs_factory

from dsh_workflow import (
    EchoProvider,
    EngineConfig,
    ToolResult,
    WorkflowEngine,
    WorkflowRun,
    WorkflowStarted,
    WorkflowStartRequest,
    WorkflowTool,
)
from dsh_workflow.testing import GatedProvider

META = {"name": "bg", "description": "a background workflow"}


def call(script: str) -> dict[str, Any]:
    return {"meta": META, "script": script}


@pytest.mark.anyio
@pytest.mark.parametrize("make_engine", both_engines())
async def test_a_tool_not_entered_still_calls_on_complete(make_engine: Any) -> None:
    delivered: list[ToolResult] = []
    async with make_engine(EngineConfig(), EchoProvider()) as engine:
        tool = WorkflowTool(engine, background=True, on_complete=delivered.append,
                            max_background_runs=2)
        for n in range(5):
            # at most two at once: wait for a slot, as a harness would after a refusal
            await await_until(lambda: len(delivered) >= n - 1,  # noqa: B023 - awaited here
                              what=f"{n - 1} completions", timeout=15)
            started = await tool.execute(call(f"return await agent('p{n}');"))
            assert not started.is_error, started.text
        await await_until(lambda: len(delivered) == 5, what="the five completions", timeout=15)
    assert sorted(c.data["result"] for c in delivered if c.data) == [
        f"echo: p{n}" for n in range(5)], [c.text for c in delivered]


@pytest.mark.anyio
@pytest.mark.parametrize("make_engine", both_engines())
async def test_an_async_on_complete_is_awaited_without_entering(make_engine: Any) -> None:
    delivered: list[str] = []

    async def on_complete(completion: ToolResult) -> None:
        await anyio.lowlevel.checkpoint()
        delivered.append(completion.text)

    async with make_engine(EngineConfig(), EchoProvider()) as engine:
        tool = WorkflowTool(engine, background=True, on_complete=on_complete)
        await tool.execute(call("return 7"))
        await await_until(lambda: len(delivered) == 1, what="the completion", timeout=15)
    assert delivered[0].startswith('workflow "bg" completed (0 agents).')


@pytest.mark.anyio
@pytest.mark.parametrize("entered", [True, False], ids=["entered", "not-entered"])
@pytest.mark.parametrize("make_engine", both_engines())
async def test_an_on_complete_that_raises_is_logged_and_cancels_nothing(
        make_engine: Any, entered: bool, caplog: pytest.LogCaptureFixture) -> None:
    gate = GatedProvider()
    delivered: list[ToolResult] = []

    def on_complete(completion: ToolResult) -> None:
        delivered.append(completion)
        if len(delivered) == 1:
            raise RuntimeError("harness callback broke")

    async with make_engine(EngineConfig(), gate) as engine:
        tool = WorkflowTool(engine, background=True, on_complete=on_complete)
        async with contextlib.AsyncExitStack() as stack:
            if entered:
                await stack.enter_async_context(tool)
            slow = await tool.execute(call("return await agent('slow');"))
            await gate.wait_started(1)
            with caplog.at_level(logging.WARNING, logger="dsh_workflow.tool"):
                await tool.execute(call("return 'quick'"))
                await await_until(lambda: len(delivered) == 1,
                                  what="the quick run's completion", timeout=15)
            gate.release_all()
            await await_until(lambda: len(delivered) == 2, what="both completions", timeout=15)
    assert [c.is_error for c in delivered] == [False, False], [c.text for c in delivered]
    assert delivered[1].data is not None and delivered[1].data["result"] == "ok:slow"
    assert slow.data is not None and delivered[1].data["run_id"] == slow.data["run_id"]
    assert not gate.cancelled
    assert any("on_complete raised" in record.getMessage() and record.exc_info
               for record in caplog.records if record.name == "dsh_workflow.tool")


@pytest.mark.anyio
@pytest.mark.parametrize("entered", [True, False], ids=["entered", "not-entered"])
async def test_delivered_completions_are_not_kept(entered: bool) -> None:
    """100 runs returning 200 kB each: what the tool keeps afterwards stays small."""
    runs = 100
    seen: list[int] = []
    script = "return 'x'.repeat(200000)"
    async with quickjs_factory(EngineConfig(), EchoProvider()) as engine:
        tool = WorkflowTool(engine, background=True, on_complete=lambda c: seen.append(len(c.data["result"])))
        async with contextlib.AsyncExitStack() as stack:
            if entered:
                await stack.enter_async_context(tool)
            await tool.execute(call(script))  # warm up before measuring
            await await_until(lambda: len(seen) == 1, what="the warm-up's completion",
                              timeout=15)
            gc.collect()
            tracemalloc.start()
            try:
                before = tracemalloc.get_traced_memory()[0]
                for n in range(runs):
                    started = await tool.execute(call(script))
                    assert not started.is_error, started.text
                    await await_until(lambda: len(seen) == n + 2,  # noqa: B023 - awaited here
                                      what=f"completion {n + 2}", timeout=15)
                gc.collect()
                grown = tracemalloc.get_traced_memory()[0] - before
            finally:
                tracemalloc.stop()
    assert len(seen) == runs + 1 and min(seen) == 200_000
    # each completion holds ~400 kB (text and value); keeping them all would be ~40 MB
    assert grown < 8 * 1024 * 1024, f"the tool kept {grown} bytes after {runs} runs"


class _BareEngine(WorkflowEngine):
    """An engine that offers only the abstract seam (no ``start_soon``): it delegates to a
    real engine."""

    def __init__(self, inner: WorkflowEngine) -> None:
        self._inner = inner
        self.events = inner.events

    def start(self, request: WorkflowStartRequest) -> WorkflowRun:
        return self._inner.start(request)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> bool | None:
        return None


@pytest.mark.anyio
async def test_without_start_soon_an_unentered_tool_refuses_instead_of_losing() -> None:
    delivered: list[ToolResult] = []
    async with quickjs_factory(EngineConfig(), EchoProvider()) as inner:
        started: list[object] = []
        inner.events.subscribe(lambda e: started.append(e) if isinstance(e, WorkflowStarted)
                               else None)
        bare = _BareEngine(inner)
        assert not bare.start_soon(anyio.lowlevel.checkpoint, name="x")
        tool = WorkflowTool(bare, background=True, on_complete=delivered.append)
        refused = await tool.execute(call("return 1"))
        assert refused.is_error and "async with WorkflowTool" in refused.text
        assert refused.data == {"error_code": "BACKGROUND_NOT_ENTERED"}
        assert started == [], "nothing was run"
        # entered, the same tool delivers
        async with tool:
            assert not (await tool.execute(call("return 1"))).is_error
            await await_until(lambda: len(delivered) == 1, what="the completion", timeout=15)
        # without on_complete, completions() is the way out: no refusal
        plain = WorkflowTool(bare, background=True)
        assert not (await plain.execute(call("return 2"))).is_error
        with anyio.fail_after(10):
            async for completion in plain.completions():  # noqa: B007 - the first one
                break
        assert completion.data is not None and completion.data["result"] == 2


@pytest.mark.anyio
@pytest.mark.parametrize("make_engine", both_engines())
async def test_engine_start_soon(make_engine: Any, caplog: pytest.LogCaptureFixture) -> None:
    ran: list[str] = []

    async def boom() -> None:
        raise RuntimeError("task failed")

    async def fine() -> None:
        ran.append("fine")

    engine = make_engine(EngineConfig(), EchoProvider())
    assert not engine.start_soon(fine, name="before")
    async with engine:
        run = engine.start(WorkflowStartRequest(meta=META, script="return await agent('a')"))
        with caplog.at_level(logging.ERROR, logger="dsh_workflow.engine"):
            assert engine.start_soon(boom, name="boom")
            assert engine.start_soon(fine, name="fine")
            with anyio.fail_after(10):
                result = await run.result()
        assert result.stop_reason == "completed", result.error
        await run.dispose()
    assert ran == ["fine"]
    assert not engine.start_soon(fine, name="after")
    assert any("boom" in record.getMessage() for record in caplog.records)


@pytest.mark.anyio
@pytest.mark.parametrize("entered", [True, False], ids=["entered", "not-entered"])
@pytest.mark.parametrize("make_engine", both_engines())
async def test_runs_cancelled_by_closing_are_still_delivered(make_engine: Any,
                                                             entered: bool) -> None:
    """Leaving the tool's block (entered) or the engine's (not entered) cancels the runs
    still going; an async on_complete still receives every one of them, whole."""
    delivered: list[str] = []

    async def on_complete(completion: ToolResult) -> None:
        await anyio.lowlevel.checkpoint()
        await anyio.sleep(0.01)
        delivered.append(completion.text)

    gate = GatedProvider()
    async with make_engine(EngineConfig(dispose_grace_s=1.0), gate) as engine:
        tool = WorkflowTool(engine, background=True, on_complete=on_complete)
        async with contextlib.AsyncExitStack() as stack:
            if entered:
                await stack.enter_async_context(tool)
            for _ in range(3):
                assert not (await tool.execute(call("return await agent('held');"))).is_error
            await await_until(lambda: len(gate.requests) >= 1, what="a held call at the provider",
                              timeout=15)
    assert len(delivered) == 3, delivered
    assert all(text.startswith("Error: workflow run was cancelled") for text in delivered)

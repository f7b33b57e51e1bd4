"""Cancellation, results and disposal (docs/embedding.md ``WorkflowRun``, engine block)."""

from __future__ import annotations

import time

import anyio
import pytest

from .._events import (
    AgentEnded,
    AgentStarted,
    LogEmitted,
    PhaseStarted,
    WorkflowEnded,
    WorkflowEvent,
    WorkflowStarted,
)
from .._result import WorkflowResult
from .._subagent import SubagentRequest, SubagentResult
from ._contract import check_run_events
from ._doubles import FunctionProvider, GatedProvider, HangingProvider
from ._suite_base import META, ConformanceBase, raw_request, run_threads

__all__ = ["LifecycleSuite"]


class _StubbornProvider:
    """Ignores cancellation for ``hold_s`` seconds (a provider that will not stop)."""

    def __init__(self, hold_s: float) -> None:
        self.hold_s = hold_s
        self.started = 0

    async def run(self, request: SubagentRequest) -> SubagentResult:
        self.started += 1
        with anyio.CancelScope(shield=True):
            await anyio.sleep(self.hold_s)
        return SubagentResult(text="late")


class LifecycleSuite(ConformanceBase):
    """``cancel()``, ``result()``, ``dispose()`` and leaving the engine block.

    Checks: a cancel right after ``start()`` means the body never runs (only WorkflowStarted
    and WorkflowEnded are emitted); a cancel mid-run settles ``cancelled`` with the first reason,
    cancels in-flight children (the provider sees the cancellation, each gets AgentEnded
    ``cancelled``), never starts queued ones, and makes every later hook inert; a cancel while
    the script spins settles within ~0.5 s, far below ``slice_cpu_limit_s``; a cancel after the
    end is a no-op; ``result()`` always yields the same object; ``dispose()`` is idempotent and
    returns within ``dispose_grace_s`` even for a stuck run; leaving the engine block disposes
    live runs and leaves no run thread.
    """

    @pytest.mark.anyio
    async def test_cancel_before_the_body_runs(self) -> None:
        provider = FunctionProvider()
        async with self.open(provider) as h:
            run = h.start("log('ran'); phase('p'); return await agent('x')")
            run.cancel("changed my mind")
            result = await h.result(run)
            assert (result.stop_reason, result.value, result.agents_started) == \
                ("cancelled", None, 0)
            assert result.error is not None and "changed my mind" in result.error
            assert provider.requests == []
            assert [type(e) for e in h.events_of(run)] == [WorkflowStarted, WorkflowEnded]

    @pytest.mark.anyio
    async def test_cancel_without_a_reason(self) -> None:
        async with self.open() as h:
            run = h.start("return 123")
            run.cancel()
            result = await h.result(run)
            assert result.stop_reason == "cancelled" and result.value is None
            assert result.error and "cancel" in result.error.lower()

    @pytest.mark.anyio
    async def test_cancel_mid_run_cancels_children_and_keeps_the_first_reason(self) -> None:
        gate = GatedProvider()
        script = "return await parallel([1, 2, 3].map(i => () => agent('job ' + i)))"
        async with self.open(gate, max_concurrent_agents=2) as h:
            run = h.start(script)
            await gate.wait_running(2)
            running = sorted(gate.running)
            run.cancel("user stopped it")
            run.cancel("a later reason")
            result = await h.result(run)
            assert result.stop_reason == "cancelled" and result.value is None
            assert "user stopped it" in (result.error or "")
            assert "a later reason" not in (result.error or "")
            await gate.wait_until(lambda: len(gate.cancelled) == 2, what="both children cancelled")
            assert sorted(gate.cancelled) == running and gate.finished == []
            await anyio.sleep(0.05)
            assert sorted(gate.started) == running, "a queued child must never start after a cancel"
            assert result.agents_started == 2
            ends = {e.seq: e.outcome for e in h.events_of(run, AgentEnded)}
            assert ends == dict.fromkeys(running, "cancelled")

    @pytest.mark.anyio
    async def test_cancel_makes_every_later_hook_inert(self) -> None:
        gate = GatedProvider()
        script = """
            phase('before');
            try {
              await agent('first');
            } catch (e) {
              try { phase('late phase'); } catch (_) {}
              try { log('late log'); } catch (_) {}
              try { console.log('late console'); } catch (_) {}
              try { await agent('late agent'); } catch (_) {}
              try { await parallel([() => agent('late parallel')]); } catch (_) {}
              try { await pipeline([1], () => agent('late pipeline')); } catch (_) {}
              return 'survived by catching';
            }
            return 'not cancelled';"""
        async with self.open(gate) as h:
            run = h.start(script)
            await gate.wait_running(1)
            run.cancel("stop everything")
            result = await h.result(run)
            assert result.stop_reason == "cancelled" and "stop everything" in (result.error or "")
            await anyio.sleep(0.05)
            assert gate.prompts == ["first"]
            assert [e.title for e in h.events_of(run, PhaseStarted)] == ["before"]
            assert h.events_of(run, LogEmitted) == []

    @pytest.mark.anyio
    async def test_cancel_during_a_long_slice_settles_promptly(self) -> None:
        slice_s = 1.2
        async with self.open(slice_cpu_limit_s=slice_s) as h:
            run = h.start("await agent('go'); log('spinning'); while (true) {}")
            await h.wait_for_event(lambda e: isinstance(e, AgentEnded) and e.run.id == run.id)
            await anyio.sleep(0.05)
            began = time.monotonic()
            run.cancel("stop spinning")
            result = await h.result(run)
            elapsed = time.monotonic() - began
            assert result.stop_reason == "cancelled" and "stop spinning" in (result.error or "")
            assert elapsed < min(0.5, slice_s / 2), f"cancel took {elapsed:.2f} s to settle"

    @pytest.mark.anyio
    async def test_cancel_after_completion_is_a_no_op(self) -> None:
        async with self.open() as h:
            run = h.start("return 'done'")
            first = await h.result(run)
            run.cancel("too late")
            second = await h.result(run)
            assert second is first and second.stop_reason == "completed"
            assert len(h.events_of(run, WorkflowEnded)) == 1

    @pytest.mark.anyio
    async def test_result_is_the_same_object_for_every_awaiter(self) -> None:
        gate = GatedProvider()
        seen: list[WorkflowResult] = []
        async with self.open(gate) as h:
            run = h.start("return await agent('x')")

            async def wait() -> None:
                seen.append(await h.result(run))

            async with anyio.create_task_group() as tg:
                tg.start_soon(wait)
                tg.start_soon(wait)
                await gate.wait_running(1)
                gate.release_all()
            seen.append(await h.result(run))
            assert seen[0].value == "ok:x"
            assert seen[0] is seen[1] is seen[2]

    @pytest.mark.anyio
    async def test_dispose_is_idempotent(self) -> None:
        gate = GatedProvider()
        async with self.open(gate) as h:
            run = h.start("return await agent('x')")
            await gate.wait_running(1)
            async with anyio.create_task_group() as tg:
                tg.start_soon(run.dispose)
                tg.start_soon(run.dispose)
            await run.dispose()
            result = await h.result(run)
            assert result.stop_reason == "cancelled" and gate.cancelled == [1]
            done = h.start("return 1")
            assert (await h.result(done)).value == 1
            await done.dispose()
            await done.dispose()
            assert (await h.result(done)).stop_reason == "completed"

    @pytest.mark.anyio
    async def test_dispose_of_a_finished_run_is_immediate(self) -> None:
        async with self.open(dispose_grace_s=2.0) as h:
            run = h.start("return 1")
            await h.result(run)
            began = time.monotonic()
            await run.dispose()
            assert time.monotonic() - began < self.margin_s

    @pytest.mark.anyio
    async def test_dispose_of_a_spinning_run_returns_within_the_grace(self) -> None:
        grace = 0.3
        async with self.open(slice_cpu_limit_s=1.2, dispose_grace_s=grace) as h:
            run = h.start("while (true) {}")
            await anyio.sleep(0.05)
            began = time.monotonic()
            await run.dispose()
            elapsed = time.monotonic() - began
            assert elapsed < grace + self.margin_s, f"dispose took {elapsed:.2f} s"
            assert (await h.result(run, timeout=0.1)).stop_reason == "cancelled"

    @pytest.mark.anyio
    async def test_dispose_of_a_run_whose_provider_ignores_cancellation(self) -> None:
        grace = 0.3
        stubborn = _StubbornProvider(hold_s=0.8)
        async with self.open(stubborn, dispose_grace_s=grace) as h:
            run = h.start("return await agent('x')")
            await h.wait_for_event(lambda e: isinstance(e, AgentStarted))
            began = time.monotonic()
            await run.dispose()
            elapsed = time.monotonic() - began
            assert elapsed < grace + self.margin_s, f"dispose took {elapsed:.2f} s"
            assert (await h.result(run, timeout=0.1)).stop_reason == "cancelled"

    @pytest.mark.anyio
    async def test_leaving_the_engine_block_disposes_live_runs(self) -> None:
        hanging = HangingProvider()
        events: list[WorkflowEvent] = []
        before = set(run_threads())
        async with self.make_engine(self.config(), hanging) as engine:
            engine.events.subscribe(events.append)
            waiting = engine.start(raw_request(meta=dict(META), script="return await agent('x')"))
            spinning = engine.start(raw_request(meta=dict(META), script="while (true) {}"))
            queued = engine.start(raw_request(meta=dict(META), script="log('hello'); return 1"))
            await hanging.wait_started(1)
        with anyio.move_on_after(0.2):  # allow a thread a moment to finish unwinding
            while set(run_threads()) - before:
                await anyio.sleep(0.005)
        left = [t.name for t in set(run_threads()) - before]
        assert not left, f"run threads outlived the engine: {left}"
        assert hanging.cancellations == 1
        for run in (waiting, spinning):
            with anyio.fail_after(0.5):
                result = await run.result()
            assert result.stop_reason == "cancelled", result
            check_run_events(events, run, result)
        with anyio.fail_after(0.5):
            check_run_events(events, queued, await queued.result())

"""Caps and resource limits (docs/embedding.md ``EngineConfig``)."""

from __future__ import annotations

import re
import time
from typing import Any

import anyio
import pytest

from .._errors import SCRIPT_FAILED
from .._events import AgentEnded
from .._result import WorkflowResult
from .._run import WorkflowRun
from ._doubles import FunctionProvider, GatedProvider, HangingProvider
from ._suite_base import (
    ConformanceBase,
    Harness,
    assert_hook_error,
    assert_names_setting,
    assert_run_error,
    caught,
)

__all__ = ["LimitSuite"]

SIBLING = "const r = await agent('sibling'); return 'sibling:' + r"


def _assert_limit_error(result: WorkflowResult, setting: str, value: object) -> None:
    error = assert_run_error(result, code="RESOURCE_LIMIT")
    assert_names_setting(error, setting, value)
    assert not re.search(r"^\W*null\W*$|threw null", error, re.IGNORECASE | re.MULTILINE), \
        f"a limit error must not read as a thrown 'null': {error!r}"


class LimitSuite(ConformanceBase):
    """Caps on agents and items, and the per-run CPU, memory, stack and time limits.

    Checks: AGENT_CAP names ``max_total_agents`` and its value, counts only started children,
    and a per-run cap lowers it; never more than ``max_concurrent_agents`` children in flight,
    started in call order. A spin before or after an ``await``, an endless promise-job loop, a
    memory bomb and deep recursion each end ``error`` with RESOURCE_LIMIT naming the setting
    and its value (never the text "null") while a sibling run on the same engine completes; a
    script waiting on a promise nothing will settle ends at once; ``run_timeout_s`` ends the
    run naming the setting; ``agent_timeout_s`` turns the child into ``null`` with outcome
    ``timeout``.
    """

    async def _settled_beside(self, h: Harness, run: WorkflowRun, script: str,
                              **fields: Any) -> tuple[WorkflowResult, float, WorkflowResult]:
        """Run ``script`` to its end while ``run`` goes on. Returns ``run``'s result, the
        monotonic time it settled (what a "promptly" bound judges, not how long the other run
        took to start and end), and the other run's result."""
        settled: list[float] = []

        async def watch() -> None:
            await h.result(run)
            settled.append(time.monotonic())

        async with anyio.create_task_group() as tg:
            tg.start_soon(watch)
            other = await h.run(script, **fields)
        return await h.result(run), settled[0], other

    async def _beside_sibling(self, h: Harness, script: str) -> WorkflowResult:
        """Run ``script`` while a sibling run holds a child; the sibling must still complete."""
        gate = GatedProvider()
        sibling = h.start(SIBLING, provider=gate)
        await gate.wait_running(1)
        result = await h.result(h.start(script))
        gate.release_all()
        sibling_result = await h.result(sibling)
        assert (sibling_result.stop_reason, sibling_result.value) == \
            ("completed", "sibling:ok:sibling"), \
            f"the sibling run was disturbed: {sibling_result!r}"
        return result

    # ---- caps -----------------------------------------------------------------------------

    @pytest.mark.anyio
    async def test_cap_total_agents_names_the_setting(self) -> None:
        provider = FunctionProvider()
        async with self.open(provider, max_total_agents=2) as h:
            result = await h.run("await agent('a'); await agent('b'); await agent('c'); return 1")
            error = assert_run_error(result, code="AGENT_CAP")
            assert_names_setting(error, "max_total_agents", 2)
            assert result.agents_started == 2 and provider.prompts == ["a", "b"]

    @pytest.mark.anyio
    async def test_cap_total_agents_is_catchable_and_counts_started_children(self) -> None:
        async with self.open(max_total_agents=2) as h:
            result = await h.run(caught("await agent('a'); await agent('b'); await agent('c');"))
            assert_hook_error(result.value, "AGENT_CAP", "max_total_agents")
            assert result.agents_started == 2

    @pytest.mark.anyio
    async def test_cap_per_run_total_agents_lowers_the_ceiling(self) -> None:
        provider = FunctionProvider()
        async with self.open(provider, max_total_agents=5) as h:
            result = await h.run("await agent('first'); await agent('second'); return 1",
                                 max_total_agents=1)
            assert_names_setting(assert_run_error(result, code="AGENT_CAP"), "max_total_agents", 1)
            assert result.agents_started == 1 and provider.prompts == ["first"]
            other = await h.run("return [await agent('a'), await agent('b')]")
            assert other.stop_reason == "completed", "the per-run cap must not leak"

    @pytest.mark.anyio
    async def test_cap_concurrency_is_never_exceeded(self) -> None:
        gate = GatedProvider()
        script = "return await parallel([1, 2, 3, 4, 5].map(i => () => agent('job ' + i)))"
        async with self.open(gate, max_concurrent_agents=2) as h:
            run = h.start(script)
            await gate.wait_running(2)
            await anyio.sleep(0.05)
            assert len(gate.started) == 2, f"only two may start: {gate.started}"
            for expected in (3, 4, 5):
                gate.release(min(gate.running))
                await gate.wait_started(expected)
                await anyio.sleep(0.02)
                assert len(gate.started) == expected, gate.started
            gate.release_all()
            result = await h.result(run)
            assert result.value == [f"ok:job {i}" for i in range(1, 6)]
            assert gate.max_running == 2 and result.agents_started == 5

    @pytest.mark.anyio
    async def test_cap_concurrency_starts_children_in_call_order(self) -> None:
        rounds = 16
        gate = GatedProvider()
        script = f"return (await parallel(Array.from({{length: {2 * rounds + 2}}}, " \
                 "(_, i) => () => agent('job ' + i)))).length"
        async with self.open(gate, max_concurrent_agents=2) as h:
            run = h.start(script)
            for round_ in range(rounds):
                await gate.wait_started(2 * round_ + 2)
                await gate.wait_running(2)
                gate.release(*sorted(gate.running))
            gate.release_all()
            assert (await h.result(run)).value == 2 * rounds + 2
            assert gate.max_running == 2
            assert gate.started == sorted(gate.started), \
                f"queued children must start in call (seq) order, also when slots free " \
                f"together: {gate.started}"
            assert gate.prompts == [f"job {i}" for i in range(2 * rounds + 2)]

    # ---- resource limits ------------------------------------------------------------------

    @pytest.mark.anyio
    @pytest.mark.parametrize("script", [
        pytest.param("while (true) {}", id="before-await"),
        pytest.param("await agent('x'); while (true) {}", id="after-await"),
        pytest.param("while (true) await null;", id="await-null-loop"),
        pytest.param("(async () => { for (;;) await null; })(); return await agent('x');",
                     id="background-job-loop"),
        # Each job queues the next and returns nothing, so the chain holds no memory: only the
        # CPU slice can stop it. (Returning the promise instead nests every level inside the
        # last: that chain also fills the heap, and which limit comes first depends on the
        # machine's speed.)
        pytest.param("const f = () => { Promise.resolve().then(f); }; f();"
                     " return await agent('x');", id="then-chain"),
        pytest.param("await parallel([() => { for (;;) {} }]);", id="inside-parallel"),
    ])
    async def test_limit_cpu_slice(self, script: str) -> None:
        async with self.open() as h:
            result = await self._beside_sibling(h, script)
            _assert_limit_error(result, "slice_cpu_limit_s", h.config.slice_cpu_limit_s)

    @pytest.mark.anyio
    @pytest.mark.parametrize("script", [
        pytest.param("const a = []; while (true) a.push('x'.repeat(1024) + a.length);",
                     id="array-of-strings"),
        pytest.param("return 'x'.repeat(2 ** 28).length;", id="one-huge-string"),
        pytest.param("await agent('x'); const a = [];"
                     " while (true) a.push(new Array(1000).fill(a.length));", id="after-await"),
        pytest.param("const m = new Map(); for (let i = 0; ; i++) m.set(i, {i});", id="map"),
    ])
    async def test_limit_memory(self, script: str) -> None:
        limit = 16 * 1024 * 1024
        # A generous CPU slice, so the memory limit is what trips even on a loaded machine.
        async with self.open(memory_limit_bytes=limit, slice_cpu_limit_s=2.0) as h:
            result = await self._beside_sibling(h, script)
            _assert_limit_error(result, "memory_limit_bytes", limit)

    @pytest.mark.anyio
    @pytest.mark.parametrize("script", [
        pytest.param("function f(n) { return f(n + 1) + 1; }\nreturn f(0);", id="recursion"),
        pytest.param("await agent('x');\nconst g = () => [g()];\nreturn g();", id="after-await"),
        pytest.param("const h = async (n) => 1 + await h(n + 1);\nreturn await h(0);",
                     id="async-recursion"),
    ])
    async def test_limit_stack(self, script: str) -> None:
        async with self.open(slice_cpu_limit_s=2.0) as h:
            result = await self._beside_sibling(h, script)
            _assert_limit_error(result, "stack_limit_bytes", h.config.stack_limit_bytes)

    @pytest.mark.anyio
    @pytest.mark.parametrize("script", [
        pytest.param("await new Promise(() => {}); return 1", id="never-settled"),
        pytest.param("return {then() {}}", id="returned-thenable"),
        pytest.param("await agent('x'); await new Promise(() => {});", id="after-await"),
    ])
    async def test_limit_stalled_script_ends_at_once(self, script: str) -> None:
        async with self.open() as h:
            began = time.monotonic()
            result = await self._beside_sibling(h, script)
            assert_run_error(result)
            assert result.error_code == SCRIPT_FAILED, "a stall is the script's own failure"
            assert time.monotonic() - began < self.margin_s + 0.2, "a stall must end at once"

    @pytest.mark.anyio
    async def test_limit_run_timeout(self) -> None:
        hanging = HangingProvider()
        async with self.open(hanging, run_timeout_s=0.4) as h:
            began = time.monotonic()
            run = h.start("log('waiting'); return await agent('slow')")
            await hanging.wait_started(1)
            result, settled, sibling = await self._settled_beside(
                h, run, "return await agent('quick')", provider=FunctionProvider())
            assert sibling.value == "ok:quick"
            elapsed = settled - began
            assert_names_setting(assert_run_error(result, code="TIMEOUT"), "run_timeout_s", 0.4)
            assert 0.35 <= elapsed < 0.4 + self.margin_s, f"ended after {elapsed:.2f} s"
            await hanging.wait_cancelled(1)

    @pytest.mark.anyio
    async def test_limit_agent_timeout(self) -> None:
        hanging = HangingProvider()
        async with self.open(hanging, agent_timeout_s=0.2) as h:
            run = h.start("const r = await agent('slow'); return {r, after: 'continued'}")
            await hanging.wait_started(1)
            began = time.monotonic()  # the child's timeout runs from its start
            result, settled, sibling = await self._settled_beside(
                h, run, "return await agent('quick')", provider=FunctionProvider())
            assert sibling.value == "ok:quick"
            assert settled - began < 0.2 + self.margin_s
            assert (result.stop_reason, result.value) == \
                ("completed", {"r": None, "after": "continued"})
            assert [e.outcome for e in h.events_of(run, AgentEnded)] == ["timeout"]
            assert hanging.cancellations == 1

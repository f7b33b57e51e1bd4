"""Budgets and usage (docs/embedding.md, "Budgets and usage"), on both engines and both backends.

The hard ceiling: once the tokens a run's children reported reach its budget, no child starts
again — later calls and calls still queued behind the concurrency cap throw fatal
``BUDGET_EXCEEDED`` — while children already running finish and are counted.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest
from _support import ENGINE_SKIPS, quickjs_factory, subprocess_factory
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_workflow import (
    AgentEnded,
    EngineConfig,
    QuickJSEngine,
    SubagentRequest,
    SubagentResult,
    Usage,
    WorkflowEnded,
    WorkflowError,
    WorkflowErrorCode,
    WorkflowEvent,
    WorkflowStartRequest,
    WorkflowTool,
)
from dsh_workflow.testing import FunctionProvider, GatedProvider, check_run_events

META = {"name": "budget-test", "description": "budget tests"}
ENGINES = {"quickjs": quickjs_factory, "subprocess": subprocess_factory(pool_size=2)}


@pytest.fixture(params=sorted(ENGINES))
def engine_factory(request: pytest.FixtureRequest) -> Any:
    factory = ENGINES[request.param]
    if factory is None:
        pytest.skip(ENGINE_SKIPS.get(request.param, "engine unavailable"))
    return factory


def costing(input_tokens: int, output_tokens: int) -> FunctionProvider:
    """Every child answers ``ok:<prompt>`` and reports this usage."""
    return FunctionProvider(lambda request: SubagentResult(
        text="ok:" + request.prompt,
        usage=Usage(input_tokens=input_tokens, output_tokens=output_tokens)))


async def run_script(factory: Any, config: EngineConfig, provider: Any, script: str,
                     **request: Any) -> tuple[Any, list[WorkflowEvent]]:
    async with factory(config, provider) as engine:
        events: list[WorkflowEvent] = []
        engine.events.subscribe(events.append)
        run = engine.start(WorkflowStartRequest(meta=META, script=script, **request))
        with anyio.fail_after(20):
            result = await run.result()
        await run.dispose()
        check_run_events(events, run, result)
        return result, events


@pytest.mark.anyio
async def test_unlimited_budget_global(engine_factory: Any) -> None:
    result, _ = await run_script(engine_factory, EngineConfig(), costing(3, 4), """
        const before = [budget.total, budget.spent(), budget.remaining() === Infinity];
        await agent('one');
        return {before, after: [budget.spent(), budget.remaining() === Infinity],
                frozen: Object.isFrozen(budget)};""")
    assert result.value == {"before": [None, 0, True], "after": [7, True], "frozen": True}
    assert result.usage == Usage(input_tokens=3, output_tokens=4)


@pytest.mark.anyio
async def test_budget_global_counts_down(engine_factory: Any) -> None:
    result, _ = await run_script(engine_factory, EngineConfig(budget_tokens=100), costing(10, 15),
                                 """
        const seen = [[budget.total, budget.spent(), budget.remaining()]];
        for (let i = 0; i < 2; i++) {
          await agent('step ' + i);
          seen.push([budget.total, budget.spent(), budget.remaining()]);
        }
        budget.total = 5;  // frozen: ignored (strict mode would throw; scripts are sloppy)
        return seen;""")
    assert result.stop_reason == "completed", result
    assert result.value == [[100, 0, 100], [100, 25, 75], [100, 50, 50]]


@pytest.mark.anyio
async def test_calls_after_the_ceiling_are_fatal_and_name_the_budget(engine_factory: Any) -> None:
    result, events = await run_script(engine_factory, EngineConfig(budget_tokens=50),
                                      costing(20, 10), """
        await agent('a');
        await agent('b');   // spent 60 >= 50 after this one
        const r = await parallel([() => agent('c')]);  // fatal: parallel must not swallow it
        return r;""")
    assert result.stop_reason == "error"
    assert result.error_code == "BUDGET_EXCEEDED" and result.error.startswith("BUDGET_EXCEEDED:"), result.error
    assert "budget_tokens=50" in result.error and "spent 60" in result.error, result.error
    assert result.agents_started == 2
    assert result.usage == Usage(input_tokens=40, output_tokens=20)
    ended = [e for e in events if isinstance(e, WorkflowEnded)]
    assert ended[0].usage == result.usage


@pytest.mark.anyio
async def test_a_script_may_catch_the_refusal_but_not_spend_more(engine_factory: Any) -> None:
    provider = costing(30, 30)
    result, _ = await run_script(engine_factory, EngineConfig(budget_tokens=60), provider, """
        await agent('a');
        const codes = [];
        for (let i = 0; i < 3; i++) {
          try { await agent('again'); } catch (e) { codes.push([e.code, e.fatal]); }
        }
        return {codes, spent: budget.spent(), remaining: budget.remaining()};""")
    assert result.value == {"codes": [["BUDGET_EXCEEDED", True]] * 3, "spent": 60,
                            "remaining": 0}
    assert provider.prompts == ["a"]


@pytest.mark.anyio
async def test_queued_calls_are_refused_and_running_children_are_counted(
        engine_factory: Any) -> None:
    """Two children run (cap 2), three wait. When the first reports the ceiling, the three
    queued calls throw BUDGET_EXCEEDED without starting; the second, already running, finishes
    and its usage is counted."""
    gate = GatedProvider()
    config = EngineConfig(budget_tokens=100, max_concurrent_agents=2)
    async with engine_factory(config, gate) as engine:
        events: list[WorkflowEvent] = []
        engine.events.subscribe(events.append)
        run = engine.start(WorkflowStartRequest(meta=META, script="""
            const out = await Promise.all([1, 2, 3, 4, 5].map(i =>
              agent('p' + i).then(v => v, e => e.code)));
            return {out, spent: budget.spent()};"""))
        await gate.wait_running(2)
        assert [r.max_output_tokens for r in gate.requests] == [100, 100]
        gate.release(1, result=SubagentResult(text="one", usage=Usage(input_tokens=60,
                                                                     output_tokens=50)))
        await gate.wait_finished(1)
        await anyio.sleep(0.2)
        assert gate.started == [1, 2], "no child may start once the budget is spent"
        gate.release(2, result=SubagentResult(text="two", usage=Usage(input_tokens=5,
                                                                     output_tokens=5)))
        with anyio.fail_after(10):
            result = await run.result()
        await run.dispose()
    check_run_events(events, run, result)
    assert result.value == {"out": ["one", "two"] + ["BUDGET_EXCEEDED"] * 3, "spent": 120}
    assert result.agents_started == 2
    assert result.usage == Usage(input_tokens=65, output_tokens=55)
    ends = {e.seq: e.usage for e in events if isinstance(e, AgentEnded)}
    assert ends == {1: Usage(input_tokens=60, output_tokens=50),
                    2: Usage(input_tokens=5, output_tokens=5)}


@pytest.mark.anyio
async def test_max_output_tokens_is_the_budget_left_at_start(engine_factory: Any) -> None:
    seen: list[int | None] = []

    def reply(request: SubagentRequest) -> SubagentResult:
        seen.append(request.max_output_tokens)
        return SubagentResult(text="x", usage=Usage(input_tokens=7, output_tokens=3))

    await run_script(engine_factory, EngineConfig(budget_tokens=35), FunctionProvider(reply),
                     "for (const p of ['a', 'b', 'c']) await agent(p); return 1;")
    assert seen == [35, 25, 15]
    seen.clear()
    await run_script(engine_factory, EngineConfig(), FunctionProvider(reply),
                     "await agent('a'); return 1;")
    assert seen == [None]


@pytest.mark.anyio
async def test_failed_children_count_and_unreported_usage_is_zero(engine_factory: Any) -> None:
    def reply(request: SubagentRequest) -> SubagentResult:
        if request.prompt == "fail":
            return SubagentResult(stop_reason="error", error="no",
                                  usage=Usage(input_tokens=4, output_tokens=1))
        return SubagentResult(text="silent")  # no usage reported

    result, events = await run_script(engine_factory, EngineConfig(budget_tokens=1000),
                                      FunctionProvider(reply), """
        const a = await agent('fail');
        const b = await agent('quiet');
        return [a, b, budget.spent()];""")
    assert result.value == [None, "silent", 5]
    assert result.usage == Usage(input_tokens=4, output_tokens=1)
    assert [e.usage for e in events if isinstance(e, AgentEnded)] == \
        [Usage(input_tokens=4, output_tokens=1), None]


@pytest.mark.anyio
async def test_request_may_only_lower_the_engine_budget(engine_factory: Any) -> None:
    async with engine_factory(EngineConfig(budget_tokens=100), costing(30, 0)) as engine:
        with pytest.raises(WorkflowError) as info:
            engine.start(WorkflowStartRequest(meta=META, script="return 1", budget_tokens=101))
        assert info.value.code == WorkflowErrorCode.INVALID_ARGUMENT
        assert "budget_tokens=100" in str(info.value)
        with pytest.raises(WorkflowError):
            engine.start(WorkflowStartRequest(meta=META, script="return 1", budget_tokens=0))
        run = engine.start(WorkflowStartRequest(
            meta=META, budget_tokens=40,
            script="for (const p of 'abc') await agent(p); return budget.total;"))
        result = await run.result()
        await run.dispose()
        assert (result.error is not None and result.error_code == "BUDGET_EXCEEDED"
                and result.error.startswith("BUDGET_EXCEEDED:"))
        assert "budget_tokens=40" in result.error
    async with engine_factory(EngineConfig(), costing(1, 1)) as engine:
        run = engine.start(WorkflowStartRequest(meta=META, script="return budget.total;",
                                                budget_tokens=500))
        assert (await run.result()).value == 500
        await run.dispose()


@pytest.mark.anyio
async def test_budget_global_is_a_boundary(engine_factory: Any) -> None:
    """The script cannot raise its budget: the host keeps the count, not the global."""
    provider = costing(50, 0)
    result, _ = await run_script(engine_factory, EngineConfig(budget_tokens=50), provider, """
        await agent('a');
        globalThis.budget = {total: 1e9, spent: () => 0, remaining: () => 1e9};
        try { Object.defineProperty(budget, 'total', {value: 1e9}); } catch (e) {}
        try { await agent('b'); return 'spent more'; } catch (e) { return e.code; }""")
    assert result.value == "BUDGET_EXCEEDED"
    assert provider.prompts == ["a"]


# ---- the property ------------------------------------------------------------------------


class _Ledger:
    """A provider that answers from a list of usages and records what was running when."""

    def __init__(self, usages: list[int], budget: int) -> None:
        self.usages = usages
        self.budget = budget
        self.reported = 0
        self.running: set[int] = set()
        self.started_after_ceiling: list[int] = []
        self.running_at_ceiling: set[int] | None = None
        self.usage_by_seq: dict[int, int] = {}
        self.crossing = 0  # what the child that reached the ceiling reported

    async def run(self, request: SubagentRequest) -> SubagentResult:
        if self.reported >= self.budget:
            self.started_after_ceiling.append(request.seq)
        self.running.add(request.seq)
        await anyio.sleep(0.001 * (request.seq % 3))
        tokens = self.usages[(request.seq - 1) % len(self.usages)]
        self.running.discard(request.seq)
        self.reported += tokens
        self.usage_by_seq[request.seq] = tokens
        if self.running_at_ceiling is None and self.reported >= self.budget:
            self.running_at_ceiling = set(self.running)
            self.crossing = tokens
        return SubagentResult(text="t", usage=Usage(input_tokens=tokens // 2,
                                                    output_tokens=tokens - tokens // 2))


@pytest.mark.parametrize("anyio_backend", ["trio"])
@settings(max_examples=25, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(usages=st.lists(st.integers(0, 60), min_size=1, max_size=8),
       concurrency=st.integers(1, 6), budget=st.integers(1, 300), calls=st.integers(1, 25))
def test_no_child_starts_after_the_ceiling(anyio_backend: str, usages: list[int],
                                           concurrency: int, budget: int, calls: int) -> None:
    ledger = _Ledger(usages, budget)

    async def main() -> Any:
        config = EngineConfig(budget_tokens=budget, max_concurrent_agents=concurrency,
                              max_total_agents=100)
        async with quickjs_factory(config, ledger) as engine:
            run = engine.start(WorkflowStartRequest(meta=META, script=f"""
                return await Promise.all(Array.from({{length: {calls}}}, (_, i) =>
                  agent('c' + i).then(() => 'ok', e => e.code)));"""))
            with anyio.fail_after(20):
                result = await run.result()
            await run.dispose()
            return result

    result = anyio.run(main, backend=anyio_backend)
    assert not ledger.started_after_ceiling, ledger.started_after_ceiling
    spent = result.usage.total_tokens
    assert spent == ledger.reported
    if ledger.running_at_ceiling is not None:
        allowance = sum(ledger.usage_by_seq.get(seq, 0) for seq in ledger.running_at_ceiling)
        assert spent <= budget + ledger.crossing + allowance
    assert result.stop_reason == "completed"
    codes = result.value
    assert codes.count("ok") == result.agents_started
    if spent < budget:
        assert all(code == "ok" for code in codes)


@pytest.mark.anyio
async def test_tool_data_carries_usage_and_the_description_explains_budget() -> None:
    async with QuickJSEngine(EngineConfig(budget_tokens=1000), provider=costing(2, 3)) as engine:
        tool = WorkflowTool(engine)
        assert "budget.remaining()" in tool.description and "BUDGET_EXCEEDED" in tool.description
        done = await tool.execute({"meta": META, "script": "await agent('a'); await agent('b');"
                                   " return budget.spent();"})
        assert not done.is_error and done.data is not None
        assert done.data["result"] == 10
        assert done.data["usage"] == {"input_tokens": 4, "output_tokens": 6}
        failed = await tool.execute({"meta": META, "script": "throw new Error('x')"})
        assert failed.data is not None
        assert failed.data["usage"] == {"input_tokens": 0, "output_tokens": 0}

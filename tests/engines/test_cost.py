"""Cost in money (docs/embedding.md, "Cost in money"): a run sums its children's costs, stores them,
journals them, and a resumed run's replayed calls keep their cost in the journal but add
nothing to the new run's spend.

Every test runs on both engines and both async backends, against a real SQLite file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from _support import ENGINE_SKIPS, subprocess_factory

from dsh_workflow import (
    AgentEnded,
    EngineConfig,
    QuickJSEngine,
    SQLiteRunStore,
    SubagentRequest,
    SubagentResult,
    Usage,
    WorkflowError,
    WorkflowErrorCode,
    WorkflowEvent,
    WorkflowResult,
    WorkflowStartRequest,
)
from dsh_workflow.testing import FunctionProvider, check_run_events

META = {"name": "cost-test", "description": "costs"}


def _factory(name: str) -> Any:
    if name == "quickjs":
        return lambda config, provider, store: QuickJSEngine(config, provider=provider,
                                                             store=store)
    if subprocess_factory(pool_size=1) is None:
        return None
    from dsh_workflow import SubprocessEngine

    return lambda config, provider, store: SubprocessEngine(config, provider=provider,
                                                            store=store, pool_size=1)


ENGINES = {"quickjs": _factory("quickjs"), "subprocess": _factory("subprocess")}


@pytest.fixture(params=sorted(ENGINES))
def make_engine(request: pytest.FixtureRequest) -> Any:
    factory = ENGINES[request.param]
    if factory is None:
        pytest.skip(ENGINE_SKIPS.get(request.param, "engine unavailable"))
    return factory


def priced_model(request: SubagentRequest) -> SubagentResult:
    """``cost:<dollars>`` prompts report that cost; ``free:`` prompts report tokens only."""
    kind, _, value = request.prompt.partition(":")
    if kind == "cost":
        return SubagentResult(text=request.prompt, usage=Usage(
            input_tokens=10, output_tokens=5, cache_read_tokens=4, cost_usd=float(value)))
    return SubagentResult(text=request.prompt, usage=Usage(input_tokens=10, output_tokens=5))


async def run_script(make_engine: Any, path: Path | None, script: str, *, args: Any = None,
                     config: EngineConfig | None = None, resume_from: str | None = None,
                     events: list[WorkflowEvent] | None = None,
                     **request: Any) -> tuple[str, WorkflowResult]:
    seen: list[WorkflowEvent] = [] if events is None else events
    store = SQLiteRunStore(path) if path is not None else None
    try:
        if store is not None:
            await store.open()
        async with make_engine(config or EngineConfig(), FunctionProvider(priced_model),
                               store) as engine:
            engine.events.subscribe(seen.append)
            run = engine.start(WorkflowStartRequest(meta=META, script=script, args=args,
                                                    resume_from=resume_from, **request))
            with anyio.fail_after(30):
                result = await run.result()
            await run.dispose()
    finally:
        if store is not None:
            await store.__aexit__(None, None, None)
    check_run_events(seen, run, result)
    return run.id, result


LOOP = """
const out = [];
for (const p of args) out.push(await agent(p));
return out;"""


@pytest.mark.anyio
async def test_a_runs_cost_is_the_sum_of_its_childrens_and_is_stored(make_engine: Any,
                                                                     tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    events: list[WorkflowEvent] = []
    run_id, result = await run_script(make_engine, path, LOOP, args=["cost:0.25", "cost:0.5"],
                                      events=events)
    assert result.stop_reason == "completed"
    assert result.usage.cost_usd == pytest.approx(0.75)
    assert result.agents_unpriced == 0 and result.usage.cache_read_tokens == 8
    ended = [e for e in events if isinstance(e, AgentEnded)]
    assert [e.usage.cost_usd for e in ended if e.usage] == [0.25, 0.5]
    async with SQLiteRunStore(path) as store:
        record = await store.get_run(run_id)
        assert record is not None and record.usage.cost_usd == pytest.approx(0.75)
        journal = await store.journal(run_id, kind="agent")
        assert [e.usage.cost_usd for e in journal if e.usage] == [0.25, 0.5]
        assert [e.usage.cache_read_tokens for e in journal if e.usage] == [4, 4]


@pytest.mark.anyio
async def test_no_known_cost_is_none_and_a_partial_one_is_flagged(make_engine: Any) -> None:
    _, none_known = await run_script(make_engine, None, LOOP, args=["free:a", "free:b"])
    assert none_known.usage.cost_usd is None and none_known.agents_unpriced == 2
    _, partial = await run_script(make_engine, None, LOOP, args=["cost:0.5", "free:b"])
    assert partial.usage.cost_usd == pytest.approx(0.5) and partial.agents_unpriced == 1


@pytest.mark.anyio
async def test_replayed_calls_keep_their_cost_in_the_journal_not_in_the_spend(
        make_engine: Any, tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    first, _ = await run_script(make_engine, path, LOOP, args=["cost:0.25", "cost:0.5"])
    second, resumed = await run_script(make_engine, path, LOOP,
                                       args=["cost:0.25", "cost:0.5", "cost:1"],
                                       resume_from=first)
    assert resumed.agents_replayed == 2
    assert resumed.usage.cost_usd == pytest.approx(1.0)  # only the live call is spent
    third, again = await run_script(make_engine, path, LOOP,
                                    args=["cost:0.25", "cost:0.5", "cost:1"],
                                    resume_from=second)
    assert again.agents_replayed == 3 and again.usage.cost_usd is None
    async with SQLiteRunStore(path) as store:
        journal = await store.journal(third, kind="agent")
        assert [e.usage.cost_usd for e in journal if e.usage] == [0.25, 0.5, 1.0]


# ---- the dollar ceiling ---------------------------------------------------------------------


@pytest.mark.anyio
async def test_the_budget_global_shows_dollars(make_engine: Any) -> None:
    script = """
const before = [budget.totalUsd, budget.spentUsd()];
await agent('cost:0.25');
await agent('free:x');
return {before, after: budget.spentUsd(), total: budget.totalUsd,
        frozen: Object.isFrozen(budget)};"""
    # A child without a known cost cannot be counted: under a token budget too it is a warning.
    _, capped = await run_script(make_engine, None, script,
                                 config=EngineConfig(budget_usd=2.5, budget_tokens=10_000))
    assert capped.value == {"before": [2.5, 0], "after": 0.25, "total": 2.5, "frozen": True}
    _, unlimited = await run_script(make_engine, None, script)
    assert unlimited.value == {"before": [None, 0], "after": 0.25, "total": None,
                               "frozen": True}


@pytest.mark.anyio
async def test_calls_past_the_dollar_ceiling_are_fatal_and_name_dollars(make_engine: Any) -> None:
    script = """
const out = [];
for (const p of args) out.push(await agent(p));
return out;"""
    events: list[WorkflowEvent] = []
    _, result = await run_script(make_engine, None, script,
                                 args=["cost:0.4", "cost:0.4", "cost:0.4", "cost:0.4"],
                                 config=EngineConfig(budget_usd=0.75), events=events)
    assert result.stop_reason == "error" and result.error is not None
    assert result.error_code is not None and result.error_code.value == "BUDGET_EXCEEDED"
    assert "budget_usd=$0.75" in result.error and "spent $0.8000" in result.error
    assert "dollar budget" in result.error
    assert result.agents_started == 2
    assert result.usage.cost_usd == pytest.approx(0.8)


@pytest.mark.anyio
async def test_a_child_the_dollar_budget_cannot_count_ends_the_run(make_engine: Any) -> None:
    script = "const out = []; for (const p of args) out.push(await agent(p)); return out;"
    _, result = await run_script(make_engine, None, script, args=["cost:0.001", "free:b", "free:c"],
                                 config=EngineConfig(budget_usd=0.01))
    assert result.stop_reason == "error" and result.error is not None
    assert result.error_code == WorkflowErrorCode.BUDGET_EXCEEDED
    assert result.error.startswith("BUDGET_EXCEEDED: the dollar budget cannot count agent 2: "
                                   "its provider named no model and reported no cost")
    assert "--price" in result.error and "--budget" in result.error
    assert result.agents_started == 2


@pytest.mark.anyio
async def test_under_a_token_budget_too_an_uncounted_child_is_a_warning(make_engine: Any) -> None:
    script = "const out = []; for (const p of args) out.push(await agent(p, {model: 'my-own'}));" \
             " return out;"
    _, result = await run_script(make_engine, None, script, args=["free:a", "free:b"],
                                 config=EngineConfig(budget_usd=0.01, budget_tokens=1_000))
    assert result.stop_reason == "completed" and result.agents_started == 2
    assert result.warnings == ("the dollar budget cannot count agent 1: model 'my-own' has no "
                               "price; only the token budget limits it",)


def test_the_dollar_budget_must_be_positive_and_finite() -> None:
    for bad in (0, -1.0, float("inf"), float("nan")):
        with pytest.raises(ValueError):
            EngineConfig(budget_usd=bad)


@pytest.mark.anyio
async def test_the_tools_data_carries_the_cost_once_known() -> None:
    from dsh_workflow import WorkflowTool

    async with QuickJSEngine(EngineConfig(), provider=FunctionProvider(priced_model)) as engine:
        tool = WorkflowTool(engine)
        script = "const out = []; for (const p of args.p) out.push(await agent(p)); return out;"
        done = await tool.execute({"meta": META, "script": script,
                                   "args": {"p": ["cost:0.25", "free:x"]}})
        assert done.data is not None and not done.is_error
        assert done.data["usage"] == {"input_tokens": 20, "output_tokens": 10,
                                      "cache_read_tokens": 4, "cost_usd": 0.25}
        free = await tool.execute({"meta": META, "script": script, "args": {"p": ["free:x"]}})
        assert free.data is not None
        assert free.data["usage"] == {"input_tokens": 10, "output_tokens": 5}



@pytest.mark.anyio
async def test_a_start_request_may_only_lower_the_dollar_budget(make_engine: Any) -> None:
    script = "return [budget.totalUsd, await agent('cost:0.5'), await agent('cost:0.5')];"
    _, lowered = await run_script(make_engine, None, script,
                                  config=EngineConfig(budget_usd=5.0), budget_usd=0.25)
    assert lowered.error_code is not None and lowered.error_code.value == "BUDGET_EXCEEDED"
    assert "budget_usd=$0.25" in (lowered.error or "")
    _, own = await run_script(make_engine, None, "return budget.totalUsd;", budget_usd=1.5)
    assert own.value == 1.5
    for bad in (10.0, 0, -1, float("nan"), float("inf")):
        async with make_engine(EngineConfig(budget_usd=5.0), FunctionProvider(priced_model),
                               None) as engine:
            with pytest.raises(WorkflowError) as refused:
                engine.start(WorkflowStartRequest(meta=META, script="return 1",
                                                  budget_usd=bad))
            assert refused.value.code == WorkflowErrorCode.INVALID_ARGUMENT
            assert "budget_usd" in str(refused.value)

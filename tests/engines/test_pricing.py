"""Prices at the seam (docs/embedding.md, "Cost in money"): the engine prices every child that
reports tokens and no cost, for the model that answered (the result's, else the request's, else
the provider's default model); ``model_prices`` wins over the price data; Claude Code's aliases
are priced from one table; a dollar budget is never silently unenforced; a child's numbers are
bounded, so one child never ends the run or the engine.

Every engine test runs on both engines and both async backends.
"""

from __future__ import annotations

import math
from typing import Any

import anyio
import pytest
from _support import ENGINE_SKIPS, EngineFactory, subprocess_factory

from dsh_workflow import (
    AgentEnded,
    EchoProvider,
    EngineConfig,
    ProviderInfo,
    QuickJSEngine,
    RoutingProvider,
    SubagentRequest,
    SubagentResult,
    Usage,
    WorkflowError,
    WorkflowErrorCode,
    WorkflowEvent,
    WorkflowResult,
    WorkflowStartRequest,
)
from dsh_workflow._prices import CLAUDE_CODE_ALIASES, cost_usd
from dsh_workflow.testing import check_run_events

META = {"name": "pricing-test", "description": "prices at the seam"}
TOKENS = Usage(input_tokens=12_000, output_tokens=800)


def _factory(name: str) -> Any:
    if name == "quickjs":
        return lambda config, provider: QuickJSEngine(config, provider=provider)
    if subprocess_factory(pool_size=1) is None:
        return None
    from dsh_workflow import SubprocessEngine

    return lambda config, provider: SubprocessEngine(config, provider=provider, pool_size=1)


ENGINES = {"quickjs": _factory("quickjs"), "subprocess": _factory("subprocess")}


@pytest.fixture(params=sorted(ENGINES))
def make_engine(request: pytest.FixtureRequest) -> Any:
    factory = ENGINES[request.param]
    if factory is None:
        pytest.skip(ENGINE_SKIPS.get(request.param, "engine unavailable"))
    return factory


class ModelProvider:
    """A user's provider with a default model: ``answered:<model>`` prompts say which model
    answered; ``cost:<dollars>`` prompts report their own cost; ``usage:<json>`` report that
    usage as is (unchecked); others report :data:`TOKENS` only."""

    def __init__(self, default_model: str | None = "gpt-4o") -> None:
        self.default_model = default_model

    @property
    def info(self) -> ProviderInfo:
        return ProviderInfo(kind="mine", identity="mine", default_model=self.default_model,
                            record={"kind": "mine", "model": self.default_model})

    async def run(self, request: SubagentRequest) -> SubagentResult:
        kind, _, value = request.prompt.partition(":")
        if kind == "answered":
            return SubagentResult(text="ok", usage=TOKENS, model=value)
        if kind == "cost":
            return SubagentResult(text="ok", usage=Usage(input_tokens=1, output_tokens=1,
                                                         cost_usd=float(value)))
        if kind == "huge":  # numbers no sum may hold, as a provider that skips validation
            return SubagentResult(text="ok", usage=Usage.model_construct(
                input_tokens=1, output_tokens=1, cache_read_tokens=0, cache_write_tokens=0,
                cost_usd=float(value)))
        if kind == "tokens":
            return SubagentResult(text="ok", usage=Usage(input_tokens=int(value)))
        return SubagentResult(text="ok", usage=TOKENS)


LOOP = """
const out = [];
for (const [p, model] of args) out.push(await agent(p, model ? {model} : {}));
return out;"""


async def run_script(make_engine: EngineFactory, provider: Any, script: str = LOOP, *, args: Any = None,
                     config: EngineConfig | None = None,
                     events: list[WorkflowEvent] | None = None) -> WorkflowResult:
    seen: list[WorkflowEvent] = [] if events is None else events
    async with make_engine(config or EngineConfig(), provider) as engine:
        engine.events.subscribe(seen.append)
        run = engine.start(WorkflowStartRequest(meta=META, script=script, args=args))
        with anyio.fail_after(30):
            result = await run.result()
        await run.dispose()
    check_run_events(seen, run, result)
    return result


def child_costs(events: list[WorkflowEvent]) -> list[float | None]:
    return [e.usage.cost_usd if e.usage else None for e in events if isinstance(e, AgentEnded)]


# ---- which model a child is priced for ------------------------------------------------------


@pytest.mark.anyio
async def test_the_answering_model_wins_then_the_requests_then_the_default(
        make_engine: Any) -> None:
    events: list[WorkflowEvent] = []
    result = await run_script(make_engine, ModelProvider("gpt-4o"), args=[
        ["answered:gpt-5", "gpt-4o-mini"],  # the result's model: what answered
        ["plain", "gpt-4o-mini"],           # the request's model
        ["plain", None],                    # the provider's default model
        ["cost:0.5", None],                 # a reported cost stays
    ], events=events)
    assert result.stop_reason == "completed" and result.agents_unpriced == 0
    expected = [cost_usd(TOKENS, "gpt-5"), cost_usd(TOKENS, "gpt-4o-mini"),
                cost_usd(TOKENS, "gpt-4o"), 0.5]
    assert child_costs(events) == pytest.approx(expected)
    assert len(set(expected)) == 4  # the three models really differ in price
    assert result.usage.cost_usd == pytest.approx(sum(c for c in expected if c is not None))


@pytest.mark.anyio
async def test_model_prices_price_unknown_models_and_win_over_the_price_data(
        make_engine: Any) -> None:
    events: list[WorkflowEvent] = []
    config = EngineConfig(model_prices={"my-model": (1.0, 2.0), "gpt-4o": (100.0, 200.0)})
    result = await run_script(make_engine, ModelProvider("my-model"), args=[
        ["plain", None], ["plain", "gpt-4o"], ["plain", "gpt-5"]], config=config, events=events)
    assert child_costs(events) == pytest.approx([
        (12_000 * 1.0 + 800 * 2.0) / 1e6, (12_000 * 100.0 + 800 * 200.0) / 1e6,
        cost_usd(TOKENS, "gpt-5")])
    assert result.agents_unpriced == 0


@pytest.mark.anyio
async def test_claude_code_aliases_are_priced_as_the_models_they_name(make_engine: Any) -> None:
    events: list[WorkflowEvent] = []
    aliases = ["sonnet", "opus", "haiku", "sonnet[1m]", "opus[1m]"]
    await run_script(make_engine, ModelProvider(None), args=[["plain", a] for a in aliases],
                     events=events)
    named = [CLAUDE_CODE_ALIASES[a.removesuffix("[1m]")] for a in aliases]
    costs = [cost_usd(TOKENS, model) for model in named]
    assert None not in costs
    assert child_costs(events) == pytest.approx(costs)


def test_the_alias_table_names_models_the_price_data_knows() -> None:
    for alias, model in CLAUDE_CODE_ALIASES.items():
        assert cost_usd(TOKENS, model) is not None, alias
        assert cost_usd(TOKENS, alias) == cost_usd(TOKENS, model)
        assert cost_usd(TOKENS, f"{alias}[1m]") == cost_usd(TOKENS, model)


# ---- a dollar ceiling is never silently unenforced ------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("where", ["engine", "request"])
async def test_a_default_model_without_a_price_is_refused_at_start(make_engine: Any,
                                                                   where: str) -> None:
    config = EngineConfig(budget_usd=1.0) if where == "engine" else EngineConfig()
    extra = {"budget_usd": 0.5} if where == "request" else {}
    async with make_engine(config, ModelProvider("my-model")) as engine:
        with pytest.raises(WorkflowError) as refused:
            engine.start(WorkflowStartRequest(meta=META, script="return 1", **extra))
    assert refused.value.code == WorkflowErrorCode.INVALID_ARGUMENT
    text = str(refused.value)
    assert "'my-model' has no price" in text
    assert "--price my-model=IN/OUT" in text and "--budget" in text


@pytest.mark.anyio
async def test_a_price_or_no_dollar_budget_admits_the_run(make_engine: Any) -> None:
    priced = EngineConfig(budget_usd=1.0, model_prices={"my-model": (1.0, 1.0)})
    result = await run_script(make_engine, ModelProvider("my-model"), args=[["plain", None]],
                              config=priced)
    assert result.stop_reason == "completed" and result.usage.cost_usd == pytest.approx(0.0128)
    unlimited = await run_script(make_engine, ModelProvider("my-model"), args=[["plain", None]])
    assert unlimited.stop_reason == "completed" and unlimited.agents_unpriced == 1


@pytest.mark.anyio
async def test_every_route_of_a_routing_provider_needs_a_price(make_engine: Any) -> None:
    routes = RoutingProvider({"main": ModelProvider("gpt-4o"), "local": ModelProvider("llama-x"),
                              "echo": EchoProvider()}, default="main")
    async with make_engine(EngineConfig(budget_usd=1.0), routes) as engine:
        with pytest.raises(WorkflowError) as refused:
            engine.start(WorkflowStartRequest(meta=META, script="return 1"))
    assert refused.value.code == WorkflowErrorCode.INVALID_ARGUMENT
    assert "'llama-x' has no price" in str(refused.value)
    events: list[WorkflowEvent] = []
    config = EngineConfig(budget_usd=1.0, model_prices={"llama-x": (0.0, 0.0)})
    script = ("return [await agent('plain'), await agent('plain', {provider: 'local'}), "
              "await agent('x', {provider: 'echo'})];")
    result = await run_script(make_engine, routes, script, config=config, events=events)
    assert result.stop_reason == "completed"
    assert child_costs(events) == pytest.approx([cost_usd(TOKENS, "gpt-4o"), 0.0, None])


@pytest.mark.anyio
async def test_echo_needs_no_price_under_a_dollar_budget(make_engine: Any) -> None:
    result = await run_script(make_engine, EchoProvider(), "return await agent('hello there');",
                              config=EngineConfig(budget_usd=0.01))
    assert result.stop_reason == "completed" and result.usage.cost_usd is None


@pytest.mark.anyio
async def test_a_child_whose_model_has_no_price_ends_the_run(make_engine: Any) -> None:
    config = EngineConfig(budget_usd=1.0)
    result = await run_script(make_engine, ModelProvider("gpt-4o"), args=[
        ["plain", None], ["plain", None], ["answered:x-unknown", None], ["plain", None]],
        config=config)
    assert result.error_code == WorkflowErrorCode.BUDGET_EXCEEDED
    assert result.error is not None and result.error.startswith(
        "BUDGET_EXCEEDED: the dollar budget cannot count agent 3: model 'x-unknown' has no "
        "price")
    assert result.agents_started == 3


# ---- numbers are bounded per child ----------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("prompt", ["huge:1.5e308", "huge:inf", "huge:nan", "huge:-1",
                                    "tokens:" + "1" + "0" * 400])
async def test_numbers_past_the_bounds_fail_that_child_with_a_reason(make_engine: Any,
                                                                     prompt: str) -> None:
    events: list[WorkflowEvent] = []
    script = ("const a = await agent(args[0]); const b = await agent(args[0]); "
              "const c = await agent('cost:0.25'); return [a, b, c];")
    result = await run_script(make_engine, ModelProvider(None), script, args=[prompt],
                              events=events)
    assert result.stop_reason == "completed"
    assert result.value == [None, None, "ok"]
    assert result.agents_failed == 2
    assert result.usage.cost_usd == pytest.approx(0.25)
    assert result.usage.cost_usd is not None and math.isfinite(result.usage.cost_usd)
    ended = [e for e in events if isinstance(e, AgentEnded)]
    for event in ended[:2]:
        assert event.outcome == "failed" and event.error is not None
        assert event.error.kind == "provider" and event.error.cause == "invalid_answer"
        assert "its usage cannot be counted: the provider reported" in event.error.message
        assert event.usage is None


@pytest.mark.anyio
async def test_one_runs_absurd_costs_leave_the_engines_other_run_alone(make_engine: Any) -> None:
    release = anyio.Event()

    class Provider(ModelProvider):
        async def run(self, request: SubagentRequest) -> SubagentResult:
            if request.prompt == "slow":
                await release.wait()
            return await super().run(request)

    async with make_engine(EngineConfig(), Provider(None)) as engine:
        other = engine.start(WorkflowStartRequest(
            meta=META, script="return [await agent('slow'), await agent('cost:0.5')];"))
        hostile = engine.start(WorkflowStartRequest(meta=META, script=(
            "const a = await agent('huge:1.5e308'); const b = await agent('huge:1.5e308');"
            "return [a, b, await agent('cost:0.25')];")))
        with anyio.fail_after(30):
            bad = await hostile.result()
            release.set()
            good = await other.result()
    assert bad.stop_reason == "completed" and bad.value == [None, None, "ok"]
    assert bad.agents_failed == 2 and bad.usage.cost_usd == pytest.approx(0.25)
    assert good.stop_reason == "completed" and good.value == ["ok", "ok"]

"""Background runs of the workflow tool (docs/embedding.md, "The model-facing tool"), on both engines and
both backends."""

from __future__ import annotations

import re
from typing import Any

import anyio
import pytest
from _support import ENGINE_SKIPS, quickjs_factory, subprocess_factory

from dsh_workflow import (
    CommandProvider,
    EchoProvider,
    EngineConfig,
    QuickJSEngine,
    ToolResult,
    WorkflowTool,
)
from dsh_workflow._subagent import provider_description
from dsh_workflow._tool import texts
from dsh_workflow._tool.background import KEPT_STATUSES
from dsh_workflow.testing import GatedProvider

META = {"name": "bg", "description": "a background workflow"}
ENGINES = {"quickjs": quickjs_factory, "subprocess": subprocess_factory(pool_size=1)}


@pytest.fixture(params=sorted(ENGINES))
def make_engine(request: pytest.FixtureRequest) -> Any:
    factory = ENGINES[request.param]
    if factory is None:
        pytest.skip(ENGINE_SKIPS.get(request.param, "engine unavailable"))
    return factory


def call(script: str) -> dict[str, Any]:
    return {"meta": META, "script": script}


def run_id_of(result: ToolResult) -> str:
    found = re.search(r"Run id: (\S+)", result.text)
    assert found, result.text
    assert result.data is not None and result.data["run_id"] == found.group(1)
    return found.group(1)


@pytest.mark.anyio
async def test_execute_returns_at_once_and_the_completion_arrives(make_engine: Any) -> None:
    gate = GatedProvider()
    delivered: list[ToolResult] = []
    async with make_engine(EngineConfig(), gate) as engine:
        async with WorkflowTool(engine, background=True, on_complete=delivered.append) as tool:
            with anyio.fail_after(5):
                started = await tool.execute(call("phase('work'); return await agent('a');"))
            assert not started.is_error and "background" in started.text
            run_id = run_id_of(started)
            await gate.wait_running(1)
            status = tool.status(run_id)
            assert status.data is not None and status.data["state"] == "running"
            assert status.data["phase"] == "work" and status.data["agents_running"] == 1
            assert "phase: work" in status.text
            gate.release_all()
            with anyio.fail_after(10):
                async for completion in tool.completions():  # noqa: B007 - the first one, used below
                    break
            assert completion.text == 'workflow "bg" completed (1 agent).\nReturn value:\n"ok:a"'
            assert delivered == [completion]
            done = tool.status(run_id).data
            assert done is not None and done["state"] == "completed" and done["agents_done"] == 1


@pytest.mark.anyio
async def test_cancel_and_the_limit(make_engine: Any) -> None:
    gate = GatedProvider()
    async with make_engine(EngineConfig(), gate) as engine:
        async with WorkflowTool(engine, background=True, max_background_runs=2) as tool:
            first = run_id_of(await tool.execute(call("return await agent('x');")))
            run_id_of(await tool.execute(call("return await agent('y');")))
            await gate.wait_started(2)
            refused = await tool.execute(call("return 1"))
            assert refused.is_error and "max_background_runs=2" in refused.text
            cancelled = tool.cancel(first)
            assert cancelled.data == {"run_id": first, "cancelled": True}
            with anyio.fail_after(10):
                async for completion in tool.completions():  # noqa: B007 - the first one, used below
                    break
            assert completion.is_error and "cancelled" in completion.text
            assert completion.data is not None and completion.data["run_id"] == first
            third = await tool.execute(call("return 3"))
            assert not third.is_error, "a slot is free again"
            unknown = tool.status("no-such-run")
            assert unknown.is_error
        # leaving the tool's block cancelled and disposed the run still waiting on the gate
        assert gate.cancelled, "the remaining run was cancelled when the tool closed"


@pytest.mark.anyio
async def test_companions_are_exported_and_dispatched(make_engine: Any) -> None:
    async with make_engine(EngineConfig(), GatedProvider()) as engine:
        tool = WorkflowTool(engine, background=True)
        names = [t["function"]["name"] for t in tool.openai_tools()]
        assert names == ["workflow", "workflow_status", "workflow_cancel", "workflow_result"]
        anthropic = tool.anthropic_tools()
        assert [t["name"] for t in anthropic] == names
        assert anthropic[1]["input_schema"]["required"] == ["runId"]
        assert "workflow_status" in tool.description and "background" in tool.description
        started = await tool.call("workflow", call("return await agent('z');"))
        run_id = run_id_of(started)
        status = await tool.call("workflow_status", {"runId": run_id})
        assert status.data is not None and status.data["run_id"] == run_id
        stopped = await tool.call("workflow_cancel", f'{{"runId": "{run_id}"}}')
        assert stopped.data == {"run_id": run_id, "cancelled": True}
        # not entered: completions are delivered while the harness iterates them
        with anyio.fail_after(10):
            async for completion in tool.completions():  # noqa: B007 - the first one, used below
                break
        assert "cancelled" in completion.text
        assert (await tool.call("workflow_status", {})).is_error
        with pytest.raises(ValueError):
            await tool.call("other", {})
    foreground = WorkflowTool(engine)
    assert [t["function"]["name"] for t in foreground.openai_tools()] == ["workflow",
                                                                          "workflow_result"]
    with pytest.raises(RuntimeError):
        foreground.status("x")


@pytest.mark.anyio
async def test_description_states_the_engines_caps_routes_and_saved_workflows(
        tmp_path: Any) -> None:
    from dsh_workflow import EchoProvider, QuickJSEngine, RoutingProvider, WorkflowLibrary

    folder = tmp_path / "wf"
    folder.mkdir()
    (folder / "a.js").write_text("export const meta = {name: 'triage', description: 't', "
                                 "whenToUse: 'a bug report needs sorting'};\n"
                                 "return 1", "utf-8")
    deep = CommandProvider(["/usr/bin/my-agent", "--deep"], cwd=str(tmp_path))
    provider = RoutingProvider({"fast": EchoProvider(), "deep": deep}, default="fast")
    config = EngineConfig(max_concurrent_agents=7, max_total_agents=123, max_items_per_call=55,
                          run_timeout_s=90, budget_tokens=5000, max_prompt_chars=12345,
                          max_value_depth=64)
    async with QuickJSEngine(config, provider=provider,
                             library=WorkflowLibrary([folder])) as engine:
        description = WorkflowTool(engine, max_result_chars=7777).description
    for fact in ["up to 7 agents run at once", "123 agent() calls per run",
                 "55 items per parallel()/pipeline() call", "a 90 s limit on the whole run",
                 "a budget of 5000 tokens", "prompts up to 12345 characters",
                 "values nested up to 64 levels", "the result text is cut at 7777 characters",
                 "Provider routes for opts.provider: deep, fast (default fast):",
                 f"- deep: {provider_description(deep)}",
                 f"- fast: {EchoProvider().description}",
                 "Saved workflows for workflow(name): triage:",
                 "- triage: t Use when: a bug report needs sorting",
                 "given the schema and asked to answer in it", "ES2023", "Array.prototype.at"]:
        assert fact in description, fact
    assert "my-agent" in deep.description and "own model, tools and files" in deep.description
    # what the engine section adds stays bounded too
    assert len(description) - len(texts.DESCRIPTION) <= 1300


@pytest.mark.anyio
async def test_description_names_what_a_single_providers_children_can_do() -> None:
    from dsh_workflow import EchoProvider, QuickJSEngine

    async with QuickJSEngine(EngineConfig(), provider=EchoProvider()) as engine:
        description = WorkflowTool(engine).description
    assert f"Children: {EchoProvider().description}." in description
    assert "no tools, no files" in description


@pytest.mark.anyio
async def test_the_status_text_shows_spend_of_unknown_cost_as_unpriced(make_engine: Any) -> None:
    from dsh_workflow import SubagentRequest, SubagentResult, Usage
    from dsh_workflow.testing import FunctionProvider

    def reply(request: SubagentRequest) -> SubagentResult:
        cost = 0.25 if request.prompt == "paid" else None
        return SubagentResult(text="ok", usage=Usage(input_tokens=10, output_tokens=5,
                                                     cost_usd=cost))

    async with make_engine(EngineConfig(), FunctionProvider(reply)) as engine:
        async with WorkflowTool(engine, background=True) as tool:
            for script, cost in (("return await agent('free');", "unpriced"),
                                 ("await agent('free'); return await agent('paid');", "$0.2500+"),
                                 ("return 1;", None)):
                run_id = run_id_of(await tool.execute(call(script)))
                with anyio.fail_after(10):
                    async for completion in tool.completions():  # noqa: B007 - the first one
                        break
                status = tool.status(run_id)
                assert status.data is not None and status.data["state"] == "completed"
                if cost is None:
                    assert "cost:" not in status.text and "$" not in status.text
                else:
                    assert f"; cost: {cost};" in status.text and "$0.0000" not in status.text
                unpriced = 0 if cost is None else 1
                assert (completion.data or {}).get("agents_unpriced", 0) == unpriced

@pytest.mark.anyio
async def test_only_the_latest_ended_runs_statuses_are_kept(make_engine: Any) -> None:
    """Many runs through one long-lived tool: the statuses kept are the newest ``kept``, the
    older ones answer a clear error (not a crash), and the tool's memory stays bounded."""
    kept, runs = 5, 13
    async with make_engine(EngineConfig(), EchoProvider()) as engine:
        async with WorkflowTool(engine, background=True, max_background_runs=1,
                                kept_background_statuses=kept) as tool:
            ids: list[str] = []
            completions = tool.completions()
            for n in range(runs):
                ids.append(run_id_of(await tool.execute(call(f"return {n}"))))
                with anyio.fail_after(10):
                    await completions.__anext__()
            for run_id in ids[-kept:]:
                data = tool.status(run_id).data
                assert data is not None and data["state"] == "completed"
            for run_id in ids[:-kept]:
                dropped = await tool.call("workflow_status", {"runId": run_id})
                assert dropped.is_error and run_id in dropped.text
                assert "no longer kept" in dropped.text and f"latest {kept}" in dropped.text
                assert tool.cancel(run_id).is_error
            assert len(tool._background._finished) == kept  # type: ignore[union-attr]  # background is set


def test_the_kept_statuses_are_bounded_by_default_and_checked() -> None:
    engine = QuickJSEngine(EngineConfig(), provider=EchoProvider())
    assert KEPT_STATUSES == 100
    for wrong in (0, -1, True, 2.0):
        with pytest.raises(ValueError, match="kept_background_statuses"):
            WorkflowTool(engine, background=True, kept_background_statuses=wrong)  # type: ignore[arg-type]  # deliberately wrong

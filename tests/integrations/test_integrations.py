"""The framework adapters, each driven inside its framework by the framework's own offline
test model: pydantic-ai's ``FunctionModel``/``TestModel``, the OpenAI Agents SDK's
``ScriptedModel``, langchain-core's ``GenericFakeChatModel`` (docs/mcp.md)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest

from dsh_workflow import EchoProvider, EngineConfig, QuickJSEngine, WorkflowTool

pytestmark = pytest.mark.anyio
#: pydantic-ai, the OpenAI Agents SDK and langchain-core's async paths use asyncio itself.
ASYNCIO_ONLY = pytest.mark.parametrize("anyio_backend", ["asyncio"])

META = {"name": "adapter-test", "description": "a workflow run by a framework's agent"}
SCRIPT = 'const xs = await parallel([1, 2].map(i => () => agent(`item ${i}`)));\nreturn {xs};'
GOOD = {"meta": META, "script": SCRIPT}
BAD = {"meta": {"name": "adapter-test"}, "script": "return 1"}  # no description
SCHEMA = {"type": "object", "properties": {"score": {"type": "integer", "minimum": 1}},
          "required": ["score"]}


@asynccontextmanager
async def workflow_tool() -> AsyncIterator[WorkflowTool]:
    async with QuickJSEngine(EngineConfig(), provider=EchoProvider()) as engine:
        yield WorkflowTool(engine)


async def expected_texts() -> tuple[str, str]:
    async with workflow_tool() as tool:
        good, bad = await tool.execute(GOOD), await tool.execute(BAD)
    assert not good.is_error and bad.is_error
    return good.text, bad.text


# -- pydantic-ai ---------------------------------------------------------------------------------


@ASYNCIO_ONLY
async def test_pydantic_ai_agent_calls_the_workflow_tool(anyio_backend: str) -> None:
    pytest.importorskip("pydantic_ai")
    from pydantic_ai import Agent
    from pydantic_ai.messages import (
        ModelMessage,
        ModelResponse,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from dsh_workflow.integrations.pydantic_ai import workflow_tool as adapt

    good_text, bad_text = await expected_texts()
    returned: list[ToolReturnPart] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        assert [t.name for t in info.function_tools] == ["workflow"]
        returns = [p for m in messages for p in getattr(m, "parts", ()) if isinstance(p, ToolReturnPart)]
        if not returns:
            return ModelResponse(parts=[ToolCallPart("workflow", GOOD, tool_call_id="c1"),
                                        ToolCallPart("workflow", BAD, tool_call_id="c2")])
        returned.extend(returns)
        return ModelResponse(parts=[TextPart("done")])

    async with workflow_tool() as tool:
        wrapped = adapt(tool)
        assert wrapped.name == "workflow" and wrapped.description == tool.description
        assert wrapped.function_schema.json_schema == tool.input_schema
        agent = Agent(FunctionModel(model), tools=[wrapped])
        result = await agent.run("run the workflow")
    assert result.output == "done"
    by_id = {part.tool_call_id: part for part in returned}
    assert by_id["c1"].content == good_text
    assert by_id["c2"].outcome == "failed" and by_id["c2"].content == bad_text


@ASYNCIO_ONLY
async def test_pydantic_ai_provider_runs_children_as_agents_with_their_own_tools(anyio_backend: str) -> None:
    pytest.importorskip("pydantic_ai")
    from pydantic_ai import Agent
    from pydantic_ai.models.test import TestModel

    from dsh_workflow.integrations.pydantic_ai import PydanticAIProvider

    looked_up: list[str] = []
    child = Agent(TestModel(call_tools="all"))

    @child.tool_plain
    def lookup(topic: str) -> str:
        """Look a topic up."""
        looked_up.append(topic)
        return f"facts about {topic}"

    script = ('const text = await agent("tell me");\n'
              f'const rated = await agent("rate it", {{schema: {json.dumps(SCHEMA)}}});\n'
              'return {text, rated};')
    async with QuickJSEngine(provider=PydanticAIProvider(child)) as engine:
        run = engine.start(_request(script))
        result = await run.result()
        await run.dispose()
    assert result.stop_reason == "completed", result.error
    assert looked_up, "the child agent did not use its own tool"
    assert isinstance(result.value["text"], str) and "facts about" in result.value["text"]
    rated = result.value["rated"]
    assert isinstance(rated, dict) and isinstance(rated["score"], int) and rated["score"] >= 1
    assert result.usage.input_tokens > 0 and result.usage.output_tokens > 0


@ASYNCIO_ONLY
async def test_pydantic_ai_provider_invalid_structured_answer_is_null(anyio_backend: str) -> None:
    pytest.importorskip("pydantic_ai")
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    from dsh_workflow.integrations.pydantic_ai import PydanticAIProvider

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, {"score": 0})])

    script = (f'const rated = await agent("rate it", {{schema: {json.dumps(SCHEMA)}}});\n'
              'return {rated};')
    async with QuickJSEngine(provider=PydanticAIProvider(Agent(FunctionModel(model)))) as engine:
        run = engine.start(_request(script))
        result = await run.result()
        await run.dispose()
    assert result.stop_reason == "completed", result.error
    assert result.value == {"rated": None}


def _request(script: str) -> Any:
    from dsh_workflow import WorkflowStartRequest

    return WorkflowStartRequest(meta=META, script=script)


# -- OpenAI Agents SDK ---------------------------------------------------------------------------


@ASYNCIO_ONLY
async def test_openai_agents_agent_calls_the_workflow_tool(anyio_backend: str) -> None:
    pytest.importorskip("agents")
    from agents import Agent, FunctionTool, RunConfig, Runner
    from agents.testing import ScriptedModel, assistant_message, function_call

    from dsh_workflow.integrations.openai_agents import workflow_tool as adapt

    good_text, bad_text = await expected_texts()
    model = ScriptedModel([
        [function_call("workflow", GOOD, call_id="c1"), function_call("workflow", BAD, call_id="c2")],
        [assistant_message("done")],
    ])
    async with workflow_tool() as tool:
        wrapped = adapt(tool)
        assert isinstance(wrapped, FunctionTool)
        assert wrapped.name == "workflow" and wrapped.description == tool.description
        assert wrapped.params_json_schema == tool.input_schema
        agent = Agent(name="assistant", model=model, tools=[wrapped])
        result = await Runner.run(agent, "run the workflow",
                                  run_config=RunConfig(tracing_disabled=True))
    assert result.final_output == "done"
    model.assert_complete()
    last = model.last_call
    assert last is not None
    outputs = {item["call_id"]: item["output"] for item in last.input
               if isinstance(item, dict) and item.get("type") == "function_call_output"}
    assert outputs == {"c1": good_text, "c2": bad_text}


# -- langchain-core ------------------------------------------------------------------------------


@ASYNCIO_ONLY
async def test_langchain_tool_answers_the_fake_models_tool_calls(anyio_backend: str) -> None:
    pytest.importorskip("langchain_core")
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_core.tools import BaseTool
    from langchain_core.utils.function_calling import convert_to_openai_tool

    from dsh_workflow.integrations.langchain import workflow_tool as adapt

    good_text, bad_text = await expected_texts()
    calls = [{"name": "workflow", "args": GOOD, "id": "c1", "type": "tool_call"},
             {"name": "workflow", "args": BAD, "id": "c2", "type": "tool_call"}]
    model = GenericFakeChatModel(messages=iter([AIMessage(content="", tool_calls=calls)]))
    async with workflow_tool() as tool:
        wrapped = adapt(tool)
        assert isinstance(wrapped, BaseTool)
        described = convert_to_openai_tool(wrapped)["function"]
        assert described["name"] == "workflow"
        assert described["description"] == tool.description
        assert described["parameters"] == tool.input_schema
        reply = await model.ainvoke("run the workflow")
        assert isinstance(reply, AIMessage)
        answers = [await wrapped.ainvoke(call) for call in reply.tool_calls]
        # Synchronous invoke works from a worker thread of the engine's loop...
        answers.append(await anyio.to_thread.run_sync(wrapped.invoke, calls[0]))
    assert all(isinstance(answer, ToolMessage) for answer in answers)
    assert [(a.tool_call_id, a.status, a.content) for a in answers] == [
        ("c1", "success", good_text), ("c2", "error", bad_text), ("c1", "success", good_text)]
    # ...and says what to do anywhere else.
    with pytest.raises(NotImplementedError, match="ainvoke"):
        wrapped.invoke(calls[0])

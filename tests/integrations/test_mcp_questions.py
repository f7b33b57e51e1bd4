"""Questions over MCP (docs/mcp.md, "Questions"): ``dsh-workflow mcp`` as a real process, the
official SDK's client. A client with an elicitation callback is asked once per question
(flat schemas; a nested one is left to the answer tool); a client without it gets a parked
run whose text names the run id, each ``qid: <qid>`` and ``workflow_answer``, which answers
and continues the run — on stdio and on streamable HTTP, on trio and asyncio."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

mcp = pytest.importorskip("mcp")
from mcp import ClientSession, StdioServerParameters, stdio_client, types  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_mcp_server import _server_argv, bearer_client, http_server  # noqa: E402

from dsh_workflow import SQLiteRunStore  # noqa: E402
from dsh_workflow._questions import Question  # noqa: E402
from dsh_workflow.integrations.mcp.elicitation import elicitation_schema  # noqa: E402

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.filterwarnings("ignore:Async generator 'http:ResourceWarning"),
    pytest.mark.filterwarnings(
        "ignore:Exception ignored in. <async_generator object "
        ":pytest.PytestUnraisableExceptionWarning"),
]

META = {"name": "mcp-asking", "description": "asks over MCP"}
SCRIPT = """
const first = await agent("alpha");
const ship = await checkpoint("Ship it?", {details: "to production"});
const sizes = await ask("Which sizes?", {choices: ["S", "M", "L"], multiple: true});
const count = await ask("How many?", {schema: {type: "object",
  properties: {n: {type: "integer", minimum: 1}}, required: ["n"]}});
const plan = await ask("Which plan?", {schema: {type: "object",
  properties: {steps: {type: "array", items: {type: "object",
    properties: {title: {type: "string"}}, required: ["title"]}}}, required: ["steps"]}});
return {first, ship, sizes, count, plan};
"""
EXPECTED = {"first": "echo: alpha", "ship": True, "sizes": ["S", "L"], "count": {"n": 3},
            "plan": {"steps": [{"title": "go"}]}}
ANSWERS: dict[str, Any] = {"q1": True, "q2": ["S", "L"], "q3": {"n": 3},
                           "q4": {"steps": [{"title": "go"}]}}

Elicit = Callable[..., Any]


@asynccontextmanager
async def stdio_session(*options: str, elicit: Elicit | None = None
                        ) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=sys.executable, args=_server_argv(*options),
                                   env=dict(os.environ))
    async with stdio_client(params) as (read, write), \
            ClientSession(read, write, elicitation_callback=elicit) as session:
        await session.initialize()
        yield session


@asynccontextmanager
async def http_session(*options: str, elicit: Elicit | None = None
                       ) -> AsyncIterator[ClientSession]:
    async with http_server(*options) as url, bearer_client() as client, \
            streamable_http_client(url, http_client=client) as (read, write, *_), \
            ClientSession(read, write, elicitation_callback=elicit) as session:
        await session.initialize()
        yield session


TRANSPORTS = {"stdio": stdio_session, "http": http_session}


@pytest.fixture(params=sorted(TRANSPORTS))
def connect(request: pytest.FixtureRequest) -> Callable[..., Any]:
    return TRANSPORTS[request.param]


def _text(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def _run_id(text: str) -> str:
    return text.rsplit("Run id: ", 1)[1].strip()


async def _records(store: Path, run_id: str) -> list[Any]:
    async with SQLiteRunStore(store) as opened:
        return await opened.question_records(run_id)


async def test_an_eliciting_client_is_asked_once_per_flat_question(connect: Any,
                                                                   tmp_path: Path) -> None:
    asked: list[types.ElicitRequestFormParams] = []

    async def elicit(context: Any, params: Any) -> types.ElicitResult:
        asked.append(params)
        properties = params.requested_schema["properties"]
        if "approve" in properties:
            return types.ElicitResult(action="accept", content={"approve": True})
        if "answer" in properties:
            return types.ElicitResult(action="accept", content={"answer": ["S", "L"]})
        return types.ElicitResult(action="accept", content={"n": 3})

    store = tmp_path / "runs.sqlite3"
    async with connect("--store", str(store), elicit=elicit) as session:
        parked = await session.call_tool("workflow", {"meta": META, "script": SCRIPT})
        text = _text(parked)
        assert not parked.is_error, text
        # the nested schema cannot be a form: the run parks on it alone
        assert "- qid: q4 (JSON matching" in text and "qid: q1" not in text
        run_id = _run_id(text)
        assert f"(run {run_id})" in text and "workflow_answer" in text
        assert [p.message for p in asked] == ["Ship it?\n\nto production", "Which sizes?",
                                              "How many?"]
        assert asked[0].requested_schema["properties"]["approve"]["type"] == "boolean"
        assert asked[1].requested_schema["properties"]["answer"]["items"]["enum"] == [
            "S", "M", "L"]
        assert asked[2].requested_schema["properties"] == {"n": {"type": "integer",
                                                                 "minimum": 1}}
        done = await session.call_tool("workflow_answer", {"runId": run_id, "qid": "q4",
                                                           "value": ANSWERS["q4"]})
    text = _text(done)
    assert not done.is_error, text
    assert json.loads(text.split("Return value:\n", 1)[1].split("\nRun id:")[0]) == EXPECTED
    assert len(asked) == 3  # the continued run replays the three answers: nobody is asked again
    records = await _records(store, run_id)
    assert [(r.question.qid, r.by) for r in records] == [
        ("q1", "mcp"), ("q2", "mcp"), ("q3", "mcp"), ("q4", "mcp")]


async def test_a_declined_elicitation_parks_the_question(tmp_path: Path) -> None:
    async def decline(context: Any, params: Any) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    async with stdio_session("--store", str(tmp_path / "runs.sqlite3"),
                             elicit=decline) as session:
        parked = await session.call_tool("workflow", {"meta": META, "script": SCRIPT})
    assert "- qid: q1 (checkpoint: true approves, false rejects): Ship it?" in _text(parked)


async def test_without_elicitation_the_run_parks_and_workflow_answer_continues_it(
        connect: Any, tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite3"
    async with connect("--store", str(store)) as session:
        names = [tool.name for tool in (await session.list_tools()).tools]
        assert names == ["workflow", "workflow_result", "workflow_answer"]
        result = await session.call_tool("workflow", {"meta": META, "script": SCRIPT})
        first_run = _run_id(_text(result))
        refused = await session.call_tool("workflow_answer", {"runId": first_run, "qid": "q1",
                                                              "value": "yes"})
        assert refused.is_error and "true (approve) or false (reject)" in _text(refused)
        for qid in ("q1", "q2", "q3", "q4"):
            text = _text(result)
            assert not result.is_error, text
            assert f"- qid: {qid} " in text and 'workflow_answer({"runId": "' in text
            result = await session.call_tool("workflow_answer", {
                "runId": _run_id(text), "qid": qid, "value": ANSWERS[qid]})
    text = _text(result)
    assert not result.is_error, text
    assert text.startswith('workflow "mcp-asking" completed (0 agents).')  # alpha replayed
    assert json.loads(text.split("Return value:\n", 1)[1].split("\nRun id:")[0]) == EXPECTED
    assert [r.by for r in await _records(store, first_run)] == ["mcp"]


async def test_a_server_without_a_store_says_the_parked_run_cannot_go_on() -> None:
    async with stdio_session() as session:
        names = [tool.name for tool in (await session.list_tools()).tools]
        result = await session.call_tool("workflow", {"meta": META, "script": SCRIPT})
    assert names == ["workflow", "workflow_result"]
    text = _text(result)
    assert "- qid: q1" in text and "cannot be continued" in text


def _question(**fields: Any) -> Question:
    return Question(**{"qid": "q1", "seq": 1, "kind": "ask", "question": "?", **fields})


def test_only_flat_schemas_become_forms() -> None:
    flat = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "boolean"},
                                             "c": {"type": "array", "items": {"enum": ["x"]}}}}
    assert elicitation_schema(_question(schema=flat)) == (flat, None)
    for nested in ({"type": "object", "properties": {"a": {"type": "object"}}},
                   {"type": "object", "properties": {"a": {"type": "array",
                                                           "items": {"type": "integer"}}}},
                   {"type": "object", "properties": {"a": {"$ref": "#/$defs/x"}},
                    "$defs": {"x": {"type": "string"}}}):
        assert elicitation_schema(_question(schema=nested)) is None
    single = elicitation_schema(_question(choices=("a", "b"), schema={"enum": ["a", "b"]}))
    assert single is not None and single[0]["properties"]["answer"]["enum"] == ["a", "b"]
    text = elicitation_schema(_question(schema={"type": "string"}))
    assert text is not None and text[1] == "answer"

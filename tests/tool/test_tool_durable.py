"""The ``workflow`` tool over engines with a run store (docs/durable-runs.md): ``resumeFrom``, the ``Run id:``
line, the schema and description with and without a store — on both engines, both backends,
with a real SQLite store file and the echo provider."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_workflow import (
    AgentReplayed,
    AgentStarted,
    EchoProvider,
    EngineConfig,
    QuickJSEngine,
    SQLiteRunStore,
    SubprocessEngine,
    WorkflowEngine,
    WorkflowEvent,
    WorkflowTool,
)
from dsh_workflow._tool import texts

META = {"name": "durable-tool", "description": "resume through the tool"}
SCRIPT = """
const a = await agent("alpha", {label: "a"});
const b = await agent("beta", {label: "b"});
return [a, b];
"""
FIXED = """
const a = await agent("alpha", {label: "a again"});
const b = await agent("beta", {label: "b again"});
const c = await agent("gamma", {label: "c"});
return [a, b, c];
"""

EngineMaker = Callable[..., AbstractAsyncContextManager[WorkflowEngine]]


def _quickjs(**kwargs: Any) -> AbstractAsyncContextManager[WorkflowEngine]:
    return QuickJSEngine(EngineConfig(), provider=EchoProvider(), **kwargs)


def _subprocess(**kwargs: Any) -> AbstractAsyncContextManager[WorkflowEngine]:
    return SubprocessEngine(EngineConfig(), provider=EchoProvider(), pool_size=0, **kwargs)


@pytest.fixture(params=[pytest.param(_quickjs, id="quickjs"),
                        pytest.param(_subprocess, id="subprocess")])
def make_engine(request: pytest.FixtureRequest) -> EngineMaker:
    return request.param  # type: ignore[no-any-return]  # pytest's param is untyped


@pytest.fixture
async def durable(make_engine: EngineMaker, tmp_path: Path) -> AsyncIterator[WorkflowEngine]:
    async with SQLiteRunStore(tmp_path / "runs.sqlite3") as store, \
            make_engine(store=store) as engine:
        yield engine


def _events(engine: WorkflowEngine) -> list[WorkflowEvent]:
    seen: list[WorkflowEvent] = []
    engine.events.subscribe(seen.append)
    return seen


def _last_line(text: str) -> str:
    return text.rsplit("\n", 1)[-1]


# -- schema and description ----------------------------------------------------------------------


@pytest.mark.anyio
async def test_schema_and_description_without_a_store_are_unchanged(
        make_engine: EngineMaker) -> None:
    async with make_engine() as engine:
        tool = WorkflowTool(engine)
        assert not tool.durable
        assert tool.input_schema == texts.input_schema()
        assert "resumeFrom" not in tool.input_schema["properties"]
        assert tool.description.startswith(texts.DESCRIPTION)
        assert "This engine: up to 16 agents run at once" in tool.description
        assert "resumeFrom" not in tool.description


@pytest.mark.anyio
async def test_schema_and_description_with_a_store(durable: WorkflowEngine) -> None:
    tool = WorkflowTool(durable)
    assert tool.durable
    schema = tool.input_schema
    assert schema["properties"]["resumeFrom"]["type"] == "string"
    assert schema["required"] == ["meta", "script"]  # script is still required
    assert schema["additionalProperties"] is False
    plain = texts.input_schema()
    assert {k: v for k, v in schema["properties"].items() if k != "resumeFrom"} == \
        plain["properties"]
    schema["properties"].clear()  # a fresh copy on every access
    assert "resumeFrom" in tool.input_schema["properties"]
    assert tool.description.startswith(texts.DESCRIPTION)
    note = tool.description[len(texts.DESCRIPTION):]
    assert "resumeFrom" in note and "Run id:" in note and "replayed" in note
    assert tool.anthropic_tool()["input_schema"] == tool.input_schema
    assert tool.openai_tool()["function"]["description"] == tool.description


# -- resumeFrom ------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_resume_round_trip(durable: WorkflowEngine) -> None:
    tool = WorkflowTool(durable)
    first = await tool.execute({"meta": META, "script": SCRIPT})
    assert not first.is_error, first.text
    run_id = first.data["run_id"]  # type: ignore[index]  # present on these results
    assert _last_line(first.text) == f"Run id: {run_id}"
    assert first.text.startswith('workflow "durable-tool" completed (2 agents).\nReturn value:\n')
    assert first.data["agents_replayed"] == 0  # type: ignore[index]  # present on these results

    events = _events(durable)
    again = await tool.execute({"meta": META, "script": FIXED, "resumeFrom": run_id})
    assert not again.is_error, again.text
    data = again.data
    assert data is not None
    assert data["result"] == ["echo: alpha", "echo: beta", "echo: gamma"]
    assert data["agents_started"] == 1 and data["agents_replayed"] == 2
    assert data["run_id"] != run_id
    assert _last_line(again.text) == f"Run id: {data['run_id']}"
    replayed = [(e.seq, e.label) for e in events if isinstance(e, AgentReplayed)]
    started = [(e.seq, e.label) for e in events if isinstance(e, AgentStarted)]
    assert replayed == [(1, "a again"), (2, "b again")]
    assert started == [(3, "c")]

    # Resuming the resumed run chains: all three replay now.
    third = await tool.execute({"meta": META, "script": FIXED, "resumeFrom": data["run_id"]})
    assert third.data["agents_replayed"] == 3 and third.data["agents_started"] == 0  # type: ignore[index]  # present on these results


@pytest.mark.anyio
async def test_null_resume_from_is_a_fresh_run(durable: WorkflowEngine) -> None:
    result = await WorkflowTool(durable).execute(
        {"meta": META, "script": SCRIPT, "resumeFrom": None})
    assert not result.is_error
    assert result.data["agents_started"] == 2  # type: ignore[index]  # present on these results


@pytest.mark.anyio
@pytest.mark.parametrize("bad", ["no-such-run", ""])
async def test_unknown_or_bad_run_id_is_a_start_error(durable: WorkflowEngine, bad: str) -> None:
    events = _events(durable)
    result = await WorkflowTool(durable).execute(
        {"meta": META, "script": SCRIPT, "resumeFrom": bad})
    assert result.is_error
    assert result.data == {"error_code": "INVALID_ARGUMENT"}
    assert result.text.startswith("Error: ") and "Run id:" not in result.text
    assert result.text == texts.start_error_text(result.text[len("Error: "):])
    assert repr(bad) in result.text
    assert events == []  # nothing started


@pytest.mark.anyio
async def test_resume_from_of_the_wrong_type_is_refused(durable: WorkflowEngine) -> None:
    result = await WorkflowTool(durable).execute({"meta": META, "script": SCRIPT, "resumeFrom": 7})
    assert result.is_error and result.data == {"error_code": "INVALID_ARGS"}
    assert "`resumeFrom` must be a run id string" in result.text


@pytest.mark.anyio
async def test_resume_from_is_not_a_parameter_without_a_store(make_engine: EngineMaker) -> None:
    async with make_engine() as engine:
        result = await WorkflowTool(engine).execute(
            {"meta": META, "script": SCRIPT, "resumeFrom": "anything"})
    assert result.is_error and result.data == {"error_code": "INVALID_ARGS"}
    assert "`resumeFrom` is not a parameter of this tool (parameters: meta, script, args)" \
        in result.text


# -- the Run id line -------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_run_id_line_survives_truncation(durable: WorkflowEngine) -> None:
    tool = WorkflowTool(durable, max_result_chars=10)
    result = await tool.execute({"meta": META, "script": "return 'x'.repeat(500)"})
    lines = result.text.split("\n")
    assert lines[-2].startswith("… [truncated: ")
    assert lines[-1] == f"Run id: {result.data['run_id']}"  # type: ignore[index]  # present on these results


@pytest.mark.anyio
async def test_failed_run_ends_with_its_run_id_and_can_be_resumed(
        durable: WorkflowEngine) -> None:
    tool = WorkflowTool(durable)
    broken = 'const a = await agent("alpha"); throw new Error("typo in step two");'
    failed = await tool.execute({"meta": META, "script": broken})
    assert failed.is_error
    assert failed.data is not None  # present on these results
    run_id = failed.data["run_id"]
    assert failed.text == texts.failed_text(failed.data["error"], "SCRIPT_ERROR") \
        + f"\nRun id: {run_id}"
    fixed = await tool.execute({"meta": META, "script": SCRIPT, "resumeFrom": run_id})
    assert not fixed.is_error, fixed.text
    assert fixed.data["agents_replayed"] == 1 and fixed.data["agents_started"] == 1  # type: ignore[index]  # present on these results


@pytest.mark.anyio
async def test_texts_without_a_store_have_no_run_id(make_engine: EngineMaker) -> None:
    async with make_engine() as engine:
        tool = WorkflowTool(engine)
        done = await tool.execute({"meta": META, "script": SCRIPT})
        failed = await tool.execute({"meta": META, "script": "throw new Error('x')"})
    assert "Run id:" not in done.text and "Run id:" not in failed.text
    assert "agents_replayed" not in done.data  # type: ignore[operator]  # present on these results


@pytest.mark.anyio
async def test_any_text_that_names_no_run_is_a_start_error(tmp_path: Path) -> None:
    async with SQLiteRunStore(tmp_path / "runs.sqlite3") as store, \
            QuickJSEngine(EngineConfig(), provider=EchoProvider(), store=store) as engine:
        tool = WorkflowTool(engine)

        @settings(max_examples=40, deadline=None,
                  suppress_health_check=[HealthCheck.function_scoped_fixture])
        @given(st.text(max_size=60))
        def check(run_id: str) -> None:
            calls.append(run_id)

        calls: list[str] = []
        check()
        for run_id in calls:
            result = await tool.execute({"meta": META, "script": "return 1",
                                         "resumeFrom": run_id})
            assert result.is_error and result.data == {"error_code": "INVALID_ARGUMENT"}
            assert result.text.startswith("Error: resume_from ")
        assert await store.list_runs() == []

"""The ``workflow`` tool end to end over the real QuickJS engine and the echo provider."""

from __future__ import annotations

import importlib.util
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import anyio
import pytest

_NEEDED = ("dsh_workflow._engines.quickjs", "dsh_workflow._providers.echo")
if any(importlib.util.find_spec(name) is None for name in _NEEDED):  # pragma: no cover
    pytest.skip("the QuickJS engine or the echo provider does not exist yet",
                allow_module_level=True)

from dsh_workflow._config import EngineConfig  # noqa: E402 - after the importorskip above
from dsh_workflow._engines.quickjs import QuickJSEngine  # noqa: E402 - after the importorskip above
from dsh_workflow._events import (  # noqa: E402 - after the importorskip above
    AgentEnded,
    AgentStarted,
    WorkflowEnded,
    WorkflowEvent,
)
from dsh_workflow._providers.echo import EchoProvider  # noqa: E402 - after the importorskip above
from dsh_workflow._tool import WorkflowTool  # noqa: E402 - after the importorskip above

META = {"name": "e2e", "description": "end-to-end tool test"}


@pytest.fixture
async def engine() -> AsyncIterator[QuickJSEngine]:
    async with QuickJSEngine(EngineConfig(dispose_grace_s=5.0), provider=EchoProvider()) as engine:
        yield engine


def ended_events(engine: QuickJSEngine) -> list[WorkflowEnded]:
    events: list[WorkflowEnded] = []

    def listen(event: WorkflowEvent) -> None:
        if isinstance(event, WorkflowEnded):
            events.append(event)

    engine.events.subscribe(listen)
    return events


@pytest.mark.anyio
async def test_success_with_agents(engine: QuickJSEngine) -> None:
    script = """
phase("fan-out");
const texts = await parallel(args.items.map(x => () => agent(`say ${x}`, {label: x})));
const shaped = await agent("count", {schema: {type: "object",
  properties: {n: {type: "integer", minimum: 3}}, required: ["n"]}});
return {answered: texts.filter(Boolean).length, n: shaped.n, note: "naïve ✓", skipped: undefined};
"""
    ended = ended_events(engine)
    result = await WorkflowTool(engine).execute(
        {"meta": META, "script": script, "args": {"items": ["a", "b"]}}, parent="caller")
    value: dict[str, Any] = {"answered": 2, "n": 3, "note": "naïve ✓"}
    assert result.text == ('workflow "e2e" completed (3 agents).\nReturn value:\n'
                           + json.dumps(value, indent=2, ensure_ascii=False))
    assert not result.is_error
    assert result.data is not None
    assert result.data["agents_started"] == 3 and result.data["result"] == value
    assert [(e.run.id, e.stop_reason) for e in ended] == [(result.data["run_id"], "completed")]


@pytest.mark.anyio
async def test_lossy_return_value_completes_with_warnings_after_the_value(
        engine: QuickJSEngine) -> None:
    script = """
const findings = [agent("a")];  // not awaited: the Promise becomes {}
return {phases: {findings}, items: [1, 2, undefined], x: () => 1};
"""
    result = await WorkflowTool(engine).execute({"meta": META, "script": script})
    value = {"phases": {"findings": [{}]}, "items": [1, 2, None]}
    assert not result.is_error
    expected = (
        'workflow "e2e" completed (1 agent).\nReturn value:\n' + json.dumps(value, indent=2)
        + "\nWarnings:\n"
        "- return value.phases.findings[0]: a Promise became {} (missing await?)\n"
        "- return value.items[2]: undefined became null\n"
        "- return value.x: a function was dropped")
    # the un-awaited child may still be running when the run ends: then it is cancelled and
    # the failed-agents line follows the warnings
    assert result.text in (expected, expected + "\nAgents cancelled: 1 of 1 — 1 cancelled.")
    assert result.data is not None and result.data["result"] == value
    assert result.data["warnings"] == [
        "return value.phases.findings[0]: a Promise became {} (missing await?)",
        "return value.items[2]: undefined became null", "return value.x: a function was dropped"]


@pytest.mark.anyio
async def test_script_error_is_a_failed_run(engine: QuickJSEngine) -> None:
    script = 'await agent("one");\nthrow new Error("boom");'
    result = await WorkflowTool(engine).execute({"meta": META, "script": script})
    assert result.is_error
    assert result.text.startswith("Error: workflow run failed: ") and "boom" in result.text
    assert result.data is not None and result.data["agents_started"] == 1


@pytest.mark.anyio
async def test_parse_error_is_reported_as_the_start_error(engine: QuickJSEngine) -> None:
    ended = ended_events(engine)
    result = await WorkflowTool(engine).execute({"meta": META, "script": "return 1 +;"})
    assert result.is_error
    assert result.text.startswith("Error: workflow script does not parse: ")
    assert "(line 1, column" in result.text
    assert result.data == {"error_code": "SCRIPT_PARSE"}
    assert ended == []


@pytest.mark.anyio
async def test_meta_violations_come_from_the_engine(engine: QuickJSEngine) -> None:
    result = await WorkflowTool(engine).execute(
        {"meta": {"name": "", "description": "d", "colour": "red"}, "script": "return 1"})
    assert result.is_error and result.text.startswith("Error: invalid meta: ")
    assert "meta.name must be a non-empty string" in result.text
    assert "colour" not in result.text  # an unknown key is kept, not refused
    assert result.data == {"error_code": "META_INVALID"}


@pytest.mark.anyio
async def test_a_parked_script_with_nothing_in_flight_fails(engine: QuickJSEngine) -> None:
    result = await WorkflowTool(engine).execute(
        {"meta": META, "script": "await new Promise(() => {});\nreturn 1"})
    assert result.is_error and result.text.startswith("Error: workflow run failed: ")
    assert "nothing will ever settle" in result.text


@pytest.mark.anyio
async def test_caller_cancellation_releases_a_parked_script() -> None:
    """A script parked on a promise no hook owns, with a slow child in flight, is released
    by cancelling the task awaiting ``execute``: the run and its child are cancelled and the
    cancellation propagates."""
    slow = EchoProvider(latency_s=60.0)
    async with QuickJSEngine(EngineConfig(dispose_grace_s=5.0), provider=slow) as engine:
        seen: list[WorkflowEvent] = []
        engine.events.subscribe(seen.append)
        tool = WorkflowTool(engine)
        propagated: list[bool] = []
        began = time.monotonic()

        async def caller() -> None:
            try:
                await tool.execute({"meta": META, "script": (
                    'const pending = agent("slow");\n'
                    "await new Promise(() => {});\nreturn 1")})
            except anyio.get_cancelled_exc_class():
                propagated.append(True)
                raise

        with anyio.move_on_after(0.3):
            await caller()
        assert propagated == [True]
        assert time.monotonic() - began < 5.0
        ended = [e for e in seen if isinstance(e, WorkflowEnded)]
        assert len(ended) == 1 and ended[0].stop_reason == "cancelled"
        assert ended[0].error is not None and "tool call cancelled" in ended[0].error
        agents = [e for e in seen if isinstance(e, AgentStarted | AgentEnded)]
        assert [type(e) for e in agents] == [AgentStarted, AgentEnded]
        assert isinstance(agents[1], AgentEnded) and agents[1].outcome == "cancelled"

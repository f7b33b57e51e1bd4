"""The tool reads an engine only through what :class:`WorkflowEngine` declares (SPEC §28):
``config``, ``provider``, ``agents``, ``library``, ``durable``, ``recorded_result``,
``start_soon`` and the lifecycle. A third-party engine that declares them gets the same tool as
the built-in engines; one that keeps the defaults gets a tool that says nothing of it."""

from __future__ import annotations

from pathlib import Path
from types import TracebackType
from typing import Any, Self

import pytest

from dsh_workflow import EchoProvider, EngineConfig, QuickJSEngine, RecordedResult, SQLiteRunStore
from dsh_workflow._events import EventHub
from dsh_workflow._meta import parse_meta
from dsh_workflow._request import WorkflowStartRequest
from dsh_workflow._result import WorkflowResult
from dsh_workflow._run import WorkflowEngine, WorkflowRun
from dsh_workflow._tool import WorkflowTool

META = {"name": "audit", "description": "d"}
#: Everything the seam declares of an engine, public names only.
DECLARED = {name for name in [*dir(WorkflowEngine), *WorkflowEngine.__annotations__]
            if not name.startswith("_")}


class _Run(WorkflowRun):
    def __init__(self, run_id: str, request: WorkflowStartRequest) -> None:
        self.id = run_id
        self.meta = parse_meta(request.meta)

    async def result(self) -> WorkflowResult:
        return WorkflowResult(stop_reason="completed", value={"a": [1, 2]})

    def cancel(self, reason: str | None = None) -> None:
        pass

    async def dispose(self) -> None:
        pass


class ThirdPartyEngine(WorkflowEngine):
    """An engine of someone else's: it keeps the seam's defaults unless told otherwise, and
    has attributes of its own the tool must not read (a ``store`` among them)."""

    def __init__(self, recorded: dict[str, RecordedResult] | None = None) -> None:
        self.events = EventHub()
        self.store = object()  # not declared: an engine that keeps a store of its own kind
        self._recorded = recorded

    @property
    def durable(self) -> bool:
        return self._recorded is not None

    async def recorded_result(self, run_id: str) -> RecordedResult | None:
        return None if self._recorded is None else self._recorded.get(run_id)

    def start(self, request: WorkflowStartRequest) -> WorkflowRun:
        return _Run("run-1", request)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        return None


class Watched(ThirdPartyEngine):
    """Notes every attribute read on the instance."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        object.__setattr__(self, "read", set())
        super().__init__(*args, **kwargs)

    def __getattribute__(self, name: str) -> Any:
        if not name.startswith("_"):
            object.__getattribute__(self, "read").add(name)
        return object.__getattribute__(self, name)


@pytest.mark.anyio
@pytest.mark.parametrize("background", [False, True])
async def test_the_tool_reads_nothing_of_an_engine_but_the_seam(background: bool) -> None:
    recorded = {"old": RecordedResult(status="completed",
                                      result={"stop_reason": "completed", "value": 7})}
    engine = Watched(recorded)
    async with WorkflowTool(engine, background=background) as tool:
        assert tool.description and tool.input_schema and tool.durable
        if not background:  # a background run is tracked by its events, which _Run has none of
            await tool.execute({"meta": META, "script": "return 1"})
        await tool.call("workflow_result", {"runId": "old"})
        await tool.call("workflow_result", {"runId": "gone"})
    read: set[str] = engine.read - {"read"}
    assert read <= DECLARED, read - DECLARED
    assert {"durable", "config", "provider", "library", "agents", "recorded_result"} <= read
    assert ("start_soon" if background else "start") in read


def test_an_engine_that_declares_nothing_gets_the_plain_tool() -> None:
    """The defaults: no engine section in the description, no ``resumeFrom`` — even though the
    engine has a ``store`` attribute of its own."""
    tool = WorkflowTool(ThirdPartyEngine())
    assert not tool.durable
    assert "resumeFrom" not in tool.input_schema["properties"]
    assert "This engine:" not in tool.description


def test_a_declared_config_and_provider_are_described() -> None:
    class Configured(ThirdPartyEngine):
        config = EngineConfig(max_concurrent_agents=3)
        provider = EchoProvider()

    description = WorkflowTool(Configured()).description
    assert "This engine: up to 3 agents run at once" in description
    assert "offline stand-in, no model" in description


@pytest.mark.anyio
async def test_a_durable_third_party_engine_serves_its_recorded_results() -> None:
    engine = ThirdPartyEngine({
        "done": RecordedResult(status="completed",
                               result={"stop_reason": "completed", "value": {"a": [1, 2]}}),
        "failed": RecordedResult(status="error", result={"stop_reason": "error"}),
        "running": RecordedResult(status="running", result=None)})
    tool = WorkflowTool(engine)
    assert tool.durable and "resumeFrom" in tool.input_schema["properties"]
    part = await tool.call("workflow_result", {"runId": "done", "pointer": "/a/1"})
    assert not part.is_error and part.data is not None and part.data["text"] == "2"
    for run_id, why in (("failed", "the run did not complete (error)"),
                        ("running", "the run has no result (running)"),
                        ("unknown", "no such run in the run store")):
        refused = await tool.call("workflow_result", {"runId": run_id})
        assert refused.is_error and why in refused.text, refused.text


@pytest.mark.anyio
async def test_the_engines_declare_their_store(tmp_path: Path) -> None:
    async with QuickJSEngine(EngineConfig(), provider=EchoProvider()) as plain:
        assert not plain.durable
        assert await plain.recorded_result("anything") is None
    async with SQLiteRunStore(tmp_path / "runs.sqlite3") as store:
        async with QuickJSEngine(EngineConfig(), provider=EchoProvider(),
                                 store=store) as engine:
            assert engine.durable
            run = engine.start(WorkflowStartRequest(meta=META, script="return {b: 2}"))
            await run.result()
            await run.dispose()
            recorded = await engine.recorded_result(run.id)
            assert recorded is not None and recorded.status == "completed"
            assert recorded.result is not None and recorded.result["value"] == {"b": 2}
            assert await engine.recorded_result("no-such-run") is None

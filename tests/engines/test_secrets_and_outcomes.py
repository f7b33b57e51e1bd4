"""Secrets never leave, and the whole result (SPEC §23), in Python on trio and asyncio: a
provider's declared secrets are out of answers, failures, events and every store file; cancelled
children are counted apart from failed ones; a cancellation names its origin."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from _support import await_until

from dsh_workflow import (
    AgentEnded,
    AgentStarted,
    EngineConfig,
    ProviderInfo,
    ProviderUnavailable,
    QuickJSEngine,
    SQLiteRunStore,
    SubagentRequest,
    SubagentResult,
    WorkflowEnded,
    WorkflowEvent,
    WorkflowResult,
    WorkflowStartRequest,
)
from dsh_workflow.testing import check_run_events

pytestmark = pytest.mark.anyio

META = {"name": "outcomes", "description": "secrets, counts and origins"}
SECRET = "zq-declared-7a1b9c3d5e"
CONFIG = EngineConfig(dispose_grace_s=1.0)


class _Provider:
    """Answers by prompt: ``leak`` echoes the secret in its text, ``json`` in a structured
    value, ``error`` in a failed result, ``raise`` in an exception; ``fail`` fails without it,
    ``hang`` never answers, anything else completes."""

    info = ProviderInfo(kind="leaky", identity="leaky", secrets=(SECRET,))

    async def run(self, request: SubagentRequest) -> SubagentResult:
        prompt = request.prompt
        if prompt == "leak":
            return SubagentResult(text=f"my key is {SECRET}")
        if prompt == "json":
            return SubagentResult(text="{}", structured={"key": SECRET, SECRET: [SECRET]})
        if prompt == "error":
            return SubagentResult(stop_reason="error", error=f"refused {SECRET}")
        if prompt == "raise":
            raise RuntimeError(f"crashed holding {SECRET}")
        if prompt == "fail":
            return SubagentResult(stop_reason="error", error="no")
        if prompt == "hang":
            await anyio.sleep_forever()
        return SubagentResult(text="ok:" + prompt)


async def _run(script: str, *, store: SQLiteRunStore | None = None, args: Any = None,
               cancel: str | None = None) -> tuple[WorkflowResult, list[WorkflowEvent]]:
    """Run ``script``; ``cancel``: ``run.cancel()``'s reason once two children started
    (``""``: cancel with no reason)."""
    events: list[WorkflowEvent] = []
    async with QuickJSEngine(CONFIG, provider=_Provider(), store=store) as engine:
        engine.events.subscribe(events.append)
        run = engine.start(WorkflowStartRequest(meta=META, script=script, args=args))
        if cancel is not None:
            await await_until(lambda: sum(isinstance(e, AgentStarted) for e in events) >= 2,
                              what="two children to start", timeout=10)
            run.cancel(cancel or None)
        with anyio.fail_after(20):
            result = await run.result()
        await run.dispose()
    check_run_events(events, run.id)
    return result, events


def _ends(events: list[WorkflowEvent]) -> dict[int, AgentEnded]:
    return {e.seq: e for e in events if isinstance(e, AgentEnded)}


async def test_declared_secrets_are_in_no_answer_event_or_store_file(tmp_path: Path) -> None:
    db = tmp_path / "runs.sqlite3"
    script = """
      return await parallel([
        () => agent('leak'), () => agent('json', {schema: {type: 'object'}}),
        () => agent('error'), () => agent('raise'),
      ]);
    """
    async with SQLiteRunStore(db) as store:
        result, events = await _run(script, store=store)
    assert result.stop_reason == "error"  # a provider that raises ends the run
    assert SECRET not in result.model_dump_json()
    for event in events:
        assert SECRET not in event.model_dump_json(), event
    ends = _ends(events)
    assert "[REDACTED]" in ends[3].error.message  # type: ignore[union-attr]  # it failed
    assert "[REDACTED]" in (ends[4].error.message if ends[4].error else "")
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.name == "runs.sqlite3" for p in files)
    for path in files:
        assert SECRET.encode() not in path.read_bytes(), path.name


async def test_the_script_sees_answers_without_the_secret() -> None:
    result, _ = await _run("return [await agent('leak'), await agent('json', "
                           "{schema: {type: 'object'}})]")
    assert result.value == ["my key is [REDACTED]",
                            {"key": "[REDACTED]", "[REDACTED]": ["[REDACTED]"]}]


async def test_children_still_running_when_the_script_returns_are_cancelled() -> None:
    result, events = await _run("agent('hang'); agent('hang'); await agent('fail'); return 1")
    assert (result.stop_reason, result.value) == ("completed", 1)
    assert (result.agents_failed, result.agents_cancelled) == (1, 2)
    ended = next(e for e in events if isinstance(e, WorkflowEnded))
    assert (ended.agents_failed, ended.agents_cancelled) == (1, 2)
    ends = _ends(events)
    assert [ends[seq].outcome for seq in (1, 2, 3)] == ["cancelled", "cancelled", "failed"]
    for seq in (1, 2):
        error = ends[seq].error
        assert error is not None and error.kind == "cancelled"
        assert error.message == "cancelled: the script returned before this agent ended"


async def test_siblings_of_a_fatal_failure_say_which_code_and_agent_ended_the_run() -> None:
    result, events = await _run("return await parallel([() => agent('hang'), "
                                "() => agent('raise'), () => agent('hang')])")
    assert result.stop_reason == "error" and result.error_code == "AGENT_FAILED"
    assert (result.agents_failed, result.agents_cancelled) == (1, 2)
    ends = _ends(events)
    for seq in (1, 3):
        error = ends[seq].error
        assert error is not None and error.kind == "cancelled"
        assert error.message == "cancelled: the run ended with AGENT_FAILED in agent 2"


class _Unavailable(_Provider):
    """``gone`` is refused as unavailable once a ``hang`` sibling is running."""

    def __init__(self) -> None:
        self.hanging = anyio.Event()

    async def run(self, request: SubagentRequest) -> SubagentResult:
        if request.prompt == "gone":
            with anyio.fail_after(10):
                await self.hanging.wait()
            raise ProviderUnavailable("credentials refused")
        if request.prompt == "hang":
            self.hanging.set()
        return await super().run(request)


async def test_a_provider_unavailable_names_its_agent_to_the_siblings() -> None:
    events: list[WorkflowEvent] = []
    async with QuickJSEngine(CONFIG, provider=_Unavailable()) as engine:
        engine.events.subscribe(events.append)
        run = engine.start(WorkflowStartRequest(
            meta=META, script="return await parallel([() => agent('hang'), () => agent('gone')])"))
        with anyio.fail_after(20):
            result = await run.result()
        await run.dispose()
    assert result.error_code == "AGENT_FAILED"
    sibling = _ends(events)[1].error
    assert sibling is not None
    assert sibling.message == "cancelled: the run ended with AGENT_FAILED in agent 2"


@pytest.mark.parametrize(("reason", "said"), [("", "cancelled by the caller"),
                                              ("user stopped it", "cancelled: user stopped it")])
async def test_a_cancel_by_the_caller_names_its_origin(reason: str, said: str) -> None:
    result, events = await _run("return await parallel([() => agent('hang'), "
                                "() => agent('hang')])", cancel=reason)
    assert result.stop_reason == "cancelled"
    if not reason:
        assert result.error == "workflow run cancelled: cancelled by the caller"
    assert (result.agents_failed, result.agents_cancelled) == (0, 2)
    for end in _ends(events).values():
        assert end.error is not None and end.error.message == said


@pytest.mark.parametrize(("origin", "said"), [("viewer", "cancelled from the viewer"),
                                              ("command line", "cancelled from the command line"),
                                              (None, "cancelled from the command line")])
async def test_a_cancel_from_another_process_names_its_origin(
        tmp_path: Path, origin: str | None, said: str) -> None:
    db = tmp_path / "runs.sqlite3"
    events: list[WorkflowEvent] = []
    async with SQLiteRunStore(db) as store:
        async with QuickJSEngine(CONFIG, provider=_Provider(), store=store) as engine:
            engine.events.subscribe(events.append)
            run = engine.start(WorkflowStartRequest(
                meta=META, script="await agent('fail'); return await agent('hang')"))
            await await_until(lambda: sum(isinstance(e, AgentStarted) for e in events) >= 2,
                              what="two children to start", timeout=10)
            async with SQLiteRunStore(db) as other:
                assert await other.request_cancel(run.id, origin=origin)
                assert await other.request_cancel(run.id, origin="elsewhere")  # the first stands
            with anyio.fail_after(10):
                result = await run.result()
            await run.dispose()
        assert result.error == f"workflow run cancelled: {said}"
        end = _ends(events)[2]
        assert end.error is not None and end.error.message == said
        record = await store.get_run(run.id)
    assert record is not None
    assert (record.agents_failed, record.agents_cancelled) == (1, 1)

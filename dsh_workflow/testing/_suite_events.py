"""Run events (docs/embedding.md ``engine.events``)."""

from __future__ import annotations

import logging
from typing import Any

import anyio
import pytest

from .._errors import SCRIPT_FAILED, WorkflowErrorCode
from .._events import (
    AgentEnded,
    AgentStarted,
    LogEmitted,
    PhaseStarted,
    WorkflowEnded,
    WorkflowEvent,
    WorkflowStarted,
)
from .._subagent import SubagentRequest, SubagentResult
from ._contract import check_run_events
from ._doubles import FunctionProvider
from ._suite_base import ConformanceBase

__all__ = ["EventSuite"]


async def _scenario_reply(request: SubagentRequest) -> SubagentResult | str:
    if request.prompt.startswith("hang"):
        await anyio.sleep_forever()
    if request.prompt == "raise":
        raise RuntimeError("provider exploded")
    if request.prompt == "fail":
        return SubagentResult(stop_reason="error", error="child failed")
    return "ok:" + request.prompt


# name -> (script, config overrides, cancel once this many children started, stop reason)
SCENARIOS: dict[str, tuple[str, dict[str, Any], int | None, str]] = {
    "completed": ("phase('p'); await agent('a'); log('l'); return 1", {}, None, "completed"),
    "child-fails": ("return await parallel([() => agent('fail'), () => agent('a')])", {}, None,
                    "completed"),
    "script-throws": ("await agent('a'); throw new Error('boom')", {}, None, "error"),
    "provider-raises": ("await parallel([() => agent('raise'), () => agent('hang')])", {}, None,
                        "error"),
    "cancelled": ("await parallel([() => agent('hang 1'), () => agent('hang 2')])", {}, 2,
                  "cancelled"),
    "cancelled-with-queue": ("await parallel([1, 2, 3].map(i => () => agent('hang ' + i)))",
                             {"max_concurrent_agents": 1}, 1, "cancelled"),
    "agent-timeout": ("return [await agent('hang'), await agent('a')]",
                      {"agent_timeout_s": 0.1}, None, "completed"),
    "run-timeout": ("await parallel([() => agent('a'), () => agent('hang')])",
                    {"run_timeout_s": 0.2}, None, "error"),
    "resource-limit": ("agent('hang'); await agent('a'); while (true) {}", {}, None, "error"),
    "unserializable": ("await agent('a'); return {n: 10n}", {}, None, "error"),
    "stray": ("agent('hang stray'); await agent('awaited'); return 'done'", {}, None,
              "completed"),
    "stalled": ("agent('a'); await new Promise(() => {})", {}, None, "error"),
}

#: name -> the result's ``error_code`` on that path (None: completed). A script's own error and
#: a stall have the code of a script failure (the table in ``dsh_workflow._errors``).
SCENARIO_CODES: dict[str, WorkflowErrorCode | None] = {
    "completed": None,
    "child-fails": None,
    "script-throws": SCRIPT_FAILED,
    "provider-raises": WorkflowErrorCode.AGENT_FAILED,
    "cancelled": WorkflowErrorCode.CANCELLED,
    "cancelled-with-queue": WorkflowErrorCode.CANCELLED,
    "agent-timeout": None,
    "run-timeout": WorkflowErrorCode.TIMEOUT,
    "resource-limit": WorkflowErrorCode.RESOURCE_LIMIT,
    "unserializable": WorkflowErrorCode.RESULT_UNSERIALIZABLE,
    "stray": None,
    "stalled": SCRIPT_FAILED,
}


class EventSuite(ConformanceBase):
    """Event order, pairing, payloads, listener containment and unsubscription.

    Checks: WorkflowStarted is emitted by ``start()`` before it returns; on every path
    (completion, child failure, script error, provider fault, cancellation with running and
    queued children, agent and run timeouts, resource limits, unserializable results, strays
    fired without await, stalls) the result carries the path's ``error_code``, WorkflowStarted
    is first, WorkflowEnded is last, exactly once, without a value and mirroring the result,
    and every AgentStarted is paired with exactly one AgentEnded of the same seq/label/phase;
    a raising listener is logged at WARNING and changes nothing; ``unsubscribe`` stops
    delivery and is idempotent; run ids are unique.
    """

    @pytest.mark.anyio
    async def test_event_workflow_started_is_emitted_by_start(self) -> None:
        async with self.open() as h:
            run = h.start("return 1")
            assert [type(e) for e in h.events_of(run)] == [WorkflowStarted]
            started = h.events_of(run)[0]
            assert started.run.id == run.id and started.run.meta == run.meta
            await h.result(run)

    @pytest.mark.anyio
    async def test_event_full_sequence_of_a_run(self) -> None:
        script = """
            phase('Scan');
            log('starting with ' + args.files.length + ' files');
            const answers = await pipeline(args.files, (prev, item) => agent('read ' + item));
            phase('Report');
            return {answers, count: answers.length};"""
        async with self.open() as h:
            run = h.start(script, args={"files": ["a.ts", "b.ts"]})
            result = await h.result(run)
            assert result.value == {"answers": ["ok:read a.ts", "ok:read b.ts"], "count": 2}
            events = h.events_of(run)
            kinds = [type(e) for e in events]
            assert tuple(kinds[:3]) == (WorkflowStarted, PhaseStarted, LogEmitted)
            assert kinds[-2:] == [PhaseStarted, WorkflowEnded]
            assert sorted(kinds[3:7], key=lambda k: k.__name__) == \
                [AgentEnded, AgentEnded, AgentStarted, AgentStarted]
            end = events[-1]
            assert isinstance(end, WorkflowEnded)
            assert (end.stop_reason, end.error, end.agents_started) == ("completed", None, 2)
            assert "value" not in end.model_dump()

    @pytest.mark.anyio
    @pytest.mark.parametrize("name", list(SCENARIOS))
    async def test_event_pairing_and_single_end_on_every_path(self, name: str) -> None:
        script, overrides, cancel_after, stop_reason = SCENARIOS[name]
        async with self.open(FunctionProvider(_scenario_reply), **overrides) as h:
            run = h.start(script)
            if cancel_after is not None:
                await h.wait_for_event(
                    lambda e: isinstance(e, AgentStarted)
                    and len(h.events_of(run, AgentStarted)) >= cancel_after)
                run.cancel("scenario cancel")
            result = await h.result(run)
            assert result.stop_reason == stop_reason, result
            assert result.error_code == SCENARIO_CODES[name], result
            await run.dispose()
            check_run_events(h.events, run, result)
            assert len(h.events_of(run, AgentStarted)) == result.agents_started

    @pytest.mark.anyio
    async def test_event_stray_children_are_reaped_and_paired(self) -> None:
        cancelled: list[str] = []

        async def reply(request: SubagentRequest) -> str:
            if request.prompt == "stray":
                try:
                    await anyio.sleep_forever()
                except anyio.get_cancelled_exc_class():
                    cancelled.append(request.prompt)
                    raise
            return "ok"

        async with self.open(FunctionProvider(reply)) as h:
            run = h.start("agent('stray'); await agent('awaited'); return 'done'")
            result = await h.result(run)
            assert (result.stop_reason, result.value, result.agents_started) == \
                ("completed", "done", 2)
            with anyio.fail_after(1.0):
                while not cancelled:
                    await anyio.sleep(0.005)
            await run.dispose()
            outcomes = {e.label: e.outcome for e in h.events_of(run, AgentEnded)}
            assert outcomes == {"stray": "cancelled", "awaited": "completed"}

    @pytest.mark.anyio
    async def test_event_raising_listener_is_logged_and_changes_nothing(
            self, caplog: pytest.LogCaptureFixture) -> None:
        later: list[WorkflowEvent] = []

        def explode(event: WorkflowEvent) -> None:
            raise ValueError("listener bug")

        async with self.open() as h:
            h.engine.events.subscribe(explode)
            h.engine.events.subscribe(later.append)
            with caplog.at_level(logging.WARNING):
                run = h.start("phase('p'); log('l'); return await agent('x')")
                result = await h.result(run)
            assert (result.stop_reason, result.value) == ("completed", "ok:x")
            assert later == h.events_of(run)
            warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
            assert len(warnings) >= len(later), "every raising call must be logged"

    @pytest.mark.anyio
    async def test_event_unsubscribe_stops_delivery(self) -> None:
        seen: list[WorkflowEvent] = []
        async with self.open() as h:
            unsubscribe = h.engine.events.subscribe(seen.append)
            first = h.start("return 1")
            await h.result(first)
            unsubscribe()
            unsubscribe()
            second = h.start("return 2")
            await h.result(second)
            assert seen == h.events_of(first)
            assert h.events_of(second), "other listeners still get events"

    @pytest.mark.anyio
    async def test_event_run_ids_are_unique(self) -> None:
        async with self.open() as h:
            runs = [h.start("return 1") for _ in range(3)]
            assert len({run.id for run in runs}) == 3
            for run in runs:
                await h.result(run)
            assert {e.run.id for e in h.events} == {run.id for run in runs}

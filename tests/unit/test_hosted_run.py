"""The run with a fake script runtime: no QuickJS, only reports and settlements.

A :class:`FakeRuntime` stands in for the runtime thread or sandbox process: the test reports
outbox batches and the end to the run, as a runtime would, and reads what the run settled.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from _support import await_until

from dsh_workflow import EngineConfig, WorkflowResult
from dsh_workflow._engines.host.host import HostedRun
from dsh_workflow._engines.host.stop import RunState
from dsh_workflow._engines.script.wire import HookKind, ReportKind, SettleEntry
from dsh_workflow._events import AgentEnded, AgentStarted, EventHub, WorkflowEnded
from dsh_workflow._meta import WorkflowMeta
from dsh_workflow._subagent import SubagentRequest
from dsh_workflow.testing import FunctionProvider, HangingProvider

pytestmark = pytest.mark.anyio

META = WorkflowMeta(name="fake", description="a run with a fake runtime")
CONFIG = EngineConfig(max_concurrent_agents=2, dispose_grace_s=0.5)


class FakeRuntime:
    """A ScriptRuntime that records what it is told; ``answers`` fires at ``expect`` replies."""

    def __init__(self, expect: int = 0) -> None:
        self.started = False
        self.stopped = False
        self.settled: list[SettleEntry] = []
        self.expect = expect
        self.answers = anyio.Event()
        if expect == 0:
            self.answers.set()

    def start(self) -> None:
        self.started = True

    def settle(self, entry: SettleEntry) -> None:
        self.settled.append(entry)
        if len([e for e in self.settled if e[0] != "spent"]) >= self.expect:
            self.answers.set()

    def stop(self) -> None:
        self.stopped = True

    def is_alive(self) -> bool:
        return False


def _state(run: HostedRun) -> RunState:
    """The run's state as it is now: a type checker would keep an earlier ``run.state`` check
    as true across the calls that move the run on."""
    return run.state


def _agents(*prompts: str, first_id: int = 1) -> str:
    return json.dumps([[HookKind.AGENT, first_id + i, p, None] for i, p in enumerate(prompts)])


async def _drive(provider: Any, batches: list[str], *, end: Any = None, expect: int = 0,
                 config: EngineConfig = CONFIG,
                 events: list[Any] | None = None) -> tuple[WorkflowResult, FakeRuntime]:
    hub = EventHub()
    if events is not None:
        hub.subscribe(events.append)
    runtime = FakeRuntime(expect)
    async with anyio.create_task_group() as tg:
        run = HostedRun(run_id="r1", meta=META, config=config, provider=provider,
                        max_total_agents=100, parent=None, events=hub, task_group=tg)
        run.attach(runtime)
        assert _state(run) is RunState.CREATED
        run.launch()
        assert runtime.started and _state(run) is RunState.RUNNING
        tg.start_soon(run.drive)
        for batch in batches:
            run.report(ReportKind.OUTBOX, batch)
        with anyio.fail_after(10):
            await runtime.answers.wait()
        run.report(ReportKind.END, end)
        with anyio.fail_after(10):
            result = await run.result()
        assert _state(run) is RunState.SETTLED
    return result, runtime


async def test_agent_calls_are_answered_and_the_end_decides_the_result() -> None:
    events: list[Any] = []
    provider = FunctionProvider(lambda r: r.prompt.upper())
    result, runtime = await _drive(provider, [_agents("a", "b", "c")], expect=3,
                                   end={"ok": True, "value": 42}, events=events)
    assert result.stop_reason == "completed" and result.value == 42
    assert result.agents_started == 3
    assert sorted(runtime.settled) == [[1, True, "A"], [2, True, "B"], [3, True, "C"]]
    # providers are entered in call order, and every start is paired with an end
    assert [r.seq for r in provider.requests] == [1, 2, 3]
    started = [e.seq for e in events if isinstance(e, AgentStarted)]
    ended = sorted(e.seq for e in events if isinstance(e, AgentEnded))
    assert started == [1, 2, 3] and ended == [1, 2, 3]
    assert isinstance(events[-1], WorkflowEnded)


async def test_the_concurrency_cap_holds_and_slots_go_in_call_order() -> None:
    running = 0
    peak = 0
    order: list[int] = []

    async def slow(request: SubagentRequest) -> str:
        nonlocal running, peak
        order.append(request.seq)
        running += 1
        peak = max(peak, running)
        await anyio.sleep(0.01)
        running -= 1
        return "ok"

    result, _ = await _drive(FunctionProvider(slow), [_agents(*"abcdefg")], expect=7,
                             end={"ok": True, "value": None})
    assert result.stop_reason == "completed"
    assert peak == CONFIG.max_concurrent_agents
    assert order == [1, 2, 3, 4, 5, 6, 7]


async def test_a_failed_end_is_rendered_and_a_script_cannot_pass_for_the_engine() -> None:
    result, _ = await _drive(FunctionProvider(), [], end={
        "ok": False, "code": None, "thrown": True, "error": "TIMEOUT: not really"})
    assert result.stop_reason == "error"
    assert result.error == "the script's own error: TIMEOUT: not really"


async def test_a_malformed_batch_is_a_fault_that_wins_over_the_end() -> None:
    result, runtime = await _drive(FunctionProvider(), ["{not json"],
                                   end={"ok": True, "value": 1})
    assert result.stop_reason == "error"
    assert result.error == "the script runtime sent a malformed message"
    assert runtime.stopped


async def test_cancel_wins_and_running_children_end_cancelled() -> None:
    events: list[Any] = []
    hub = EventHub()
    hub.subscribe(events.append)
    provider = HangingProvider()
    runtime = FakeRuntime()
    async with anyio.create_task_group() as tg:
        run = HostedRun(run_id="r2", meta=META, config=CONFIG, provider=provider,
                        max_total_agents=100, parent=None, events=hub, task_group=tg)
        run.attach(runtime)
        tg.start_soon(run.drive)
        await anyio.lowlevel.checkpoint()
        run.report(ReportKind.OUTBOX, _agents("a", "b", "c"))
        await await_until(lambda: len(provider.requests) >= 2, what="two children to start")
        run.cancel("enough")
        run.cancel("ignored: the first reason wins")
        run.report(ReportKind.END, None)
        with anyio.fail_after(10):
            result = await run.result()
    assert result.stop_reason == "cancelled"
    assert result.error == "workflow run cancelled: enough"
    assert result.agents_started == 2  # the queued third never started
    ends = {e.seq: e.outcome for e in events if isinstance(e, AgentEnded)}
    assert ends == {1: "cancelled", 2: "cancelled"}
    assert runtime.stopped and runtime.settled == []  # nothing reaches a stopped runtime


async def test_the_budget_refuses_calls_once_spent() -> None:
    from dsh_workflow._subagent import SubagentResult, Usage

    def costly(request: SubagentRequest) -> SubagentResult:
        return SubagentResult(stop_reason="completed", text="t",
                              usage=Usage(input_tokens=5, output_tokens=5))

    hub = EventHub()
    runtime = FakeRuntime(expect=2)
    async with anyio.create_task_group() as tg:
        run = HostedRun(run_id="r3", meta=META, config=CONFIG, provider=FunctionProvider(costly),
                        max_total_agents=100, parent=None, events=hub, task_group=tg,
                        budget_tokens=10)
        run.attach(runtime)
        tg.start_soon(run.drive)
        run.report(ReportKind.OUTBOX, _agents("a"))
        await await_until(lambda: runtime.settled and runtime.settled[-1][0] == 1,
                          what="the first child to settle")
        run.report(ReportKind.OUTBOX, _agents("b", first_id=2))
        with anyio.fail_after(10):
            await runtime.answers.wait()
        run.report(ReportKind.END, {"ok": True, "value": None})
        result = await run.result()
    assert runtime.settled[0] == ["spent", 10]
    assert runtime.settled[1] == [1, True, "t"]
    assert runtime.settled[2][:3] == [2, False, "BUDGET_EXCEEDED"]
    assert result.usage is not None and result.usage.input_tokens == 5


def _cancel(*call_ids: Any) -> str:
    return json.dumps([[HookKind.CANCEL, list(call_ids)]])


async def test_a_cancel_message_ends_running_ready_and_queued_calls_at_once() -> None:
    """first()'s losers: a running child is cancelled, one not yet taken by a worker or still
    queued never reaches the provider; each answers null with a ``cancelled`` reason, and the
    started ones end ``cancelled`` before any later message is served."""
    events: list[Any] = []
    hub = EventHub()
    hub.subscribe(events.append)
    provider = HangingProvider()
    runtime = FakeRuntime()
    config = EngineConfig(max_concurrent_agents=2, dispose_grace_s=0.5, max_failed_agents=0)
    agents = [[HookKind.AGENT, i, p, None] for i, p in enumerate("abcd", start=1)]
    async with anyio.create_task_group() as tg:
        run = HostedRun(run_id="r4", meta=META, config=config, provider=provider,
                        max_total_agents=100, parent=None, events=hub, task_group=tg)
        run.attach(runtime)
        tg.start_soon(run.drive)
        await anyio.lowlevel.checkpoint()
        # a and b get the slots (no worker has taken b yet when it is cancelled), c and d queue
        run.report(ReportKind.OUTBOX, json.dumps([*agents, [HookKind.CANCEL, [2]]]))
        with anyio.fail_after(10):
            await provider.wait_started(2)  # a, and c in b's slot
        # 1 runs, 4 is queued, 99 was never accepted; then a later call
        run.report(ReportKind.OUTBOX, json.dumps([[HookKind.CANCEL, [1, 4, 99]],
                                                  [HookKind.AGENT, 5, "e", None]]))
        with anyio.fail_after(10):
            await provider.wait_cancelled(1)
            await provider.wait_started(3)  # e, in a's slot
        run.report(ReportKind.END, {"ok": True, "value": None})
        with anyio.fail_after(10):
            result = await run.result()
    assert result.stop_reason == "completed", result.error  # losers are not failures
    assert [r.prompt for r in provider.requests] == ["a", "c", "e"]
    answered = {e[0]: e for e in runtime.settled if e[0] != "spent"}
    assert set(answered) == {1, 2, 4}
    for entry in answered.values():
        assert entry[1:3] == [True, None] and entry[3]["kind"] == "cancelled"
        assert "first()" in entry[3]["message"]
    order = [(type(e).__name__, e.seq, getattr(e, "outcome", None)) for e in events
             if isinstance(e, (AgentStarted, AgentEnded))]
    assert ("AgentEnded", 2, "cancelled") in order  # admitted, so started: and ended
    assert ("AgentEnded", 1, "cancelled") in order
    assert not [o for o in order if o[1] == 4]  # the queued call never started
    # 1 ended while its cancel was served: before e (the host's seq 5) started
    assert order.index(("AgentEnded", 1, "cancelled")) < order.index(("AgentStarted", 5, None))


async def test_a_malformed_cancel_message_is_a_fault() -> None:
    result, runtime = await _drive(FunctionProvider(), [_cancel("1")],
                                   end={"ok": True, "value": 1})
    assert result.stop_reason == "error"
    assert "cancel" in (result.error or "")
    assert runtime.stopped

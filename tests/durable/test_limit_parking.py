"""A provider's usage limit parks the run (docs/durable-runs.md, "A provider's limit"): a child
failing with ``error_kind "limit"`` — or a 429 whose ``retry_at`` lies beyond the retry cap —
stops the run ``waiting`` with reason ``limit`` and ``resume_after``; nothing is reported
completed; the children still running are cancelled; a resume replays every completed call
and runs the rest. ``on_limit="fail"`` keeps the child's failure.

Both engines and both async backends, against a real SQLite file.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from _support import ENGINE_SKIPS, subprocess_factory

from dsh_workflow import (
    AgentEnded,
    EngineConfig,
    QuickJSEngine,
    RetryPolicy,
    SQLiteRunStore,
    SubagentRequest,
    SubagentResult,
    WorkflowEnded,
    WorkflowEvent,
    WorkflowStartRequest,
)
from dsh_workflow.testing import FunctionProvider, check_run_events

pytestmark = pytest.mark.anyio

META = {"name": "limited", "description": "meets a usage limit"}
SCRIPT = """
const a = await agent("one");
const [b, c] = await Promise.all([agent("limited two"), agent("slow three")]);
return {a, b, c};"""
RESET = datetime(2031, 1, 2, 3, 4, 5, tzinfo=UTC)


def _factory(name: str) -> Any:
    if name == "quickjs":
        return lambda config, provider, store: QuickJSEngine(config, provider=provider,
                                                             store=store)
    if subprocess_factory(pool_size=1) is None:
        return None
    from dsh_workflow import SubprocessEngine

    return lambda config, provider, store: SubprocessEngine(config, provider=provider,
                                                            store=store, pool_size=1)


ENGINES = {"quickjs": _factory("quickjs"), "subprocess": _factory("subprocess")}


@pytest.fixture(params=sorted(ENGINES))
def make_engine(request: pytest.FixtureRequest) -> Any:
    factory = ENGINES[request.param]
    if factory is None:
        pytest.skip(ENGINE_SKIPS.get(request.param, "engine unavailable"))
    return factory


class Limited:
    """Answers every prompt, except that ``limited`` prompts fail as told while ``limited``."""

    def __init__(self, failure: SubagentResult) -> None:
        self.failure = failure
        self.limited = True
        self.paid: list[str] = []
        self.provider = FunctionProvider(self._answer)

    async def _answer(self, request: SubagentRequest) -> SubagentResult:
        if request.prompt.startswith("slow"):
            await anyio.sleep(0.5 if self.limited else 0)
        self.paid.append(request.prompt)
        if self.limited and request.prompt.startswith("limited"):
            return self.failure
        return SubagentResult(stop_reason="completed", text=request.prompt.upper())


@pytest.mark.parametrize("failure", [
    pytest.param(SubagentResult(stop_reason="error", error="usage limit reached",
                                error_kind="limit", retry_at=RESET), id="limit"),
    pytest.param(SubagentResult(stop_reason="error", error="429 Too Many Requests",
                                error_kind="rate_limited", retry_at=RESET), id="429-beyond-cap"),
])
async def test_a_usage_limit_parks_and_a_resume_pays_only_what_did_not_complete(
        make_engine: Any, tmp_path: Path, failure: SubagentResult) -> None:
    limited = Limited(failure)
    events: list[WorkflowEvent] = []
    config = EngineConfig(retry=RetryPolicy(attempts=2, base_s=0.01, cap_s=30))
    async with SQLiteRunStore(tmp_path / "runs.sqlite3") as store:
        async with make_engine(config, limited.provider, store) as engine:
            engine.events.subscribe(events.append)
            run = engine.start(WorkflowStartRequest(meta=META, script=SCRIPT))
            parked = await run.result()
            await run.dispose()
        assert parked.stop_reason == "waiting" and parked.waiting_reason == "limit"
        assert parked.resume_after == RESET and parked.pending == ()
        assert parked.value is None and parked.error is None
        record = await store.get_run(run.id)
        assert record is not None and record.status == "waiting"
        ended = {e.seq: e.outcome for e in events if isinstance(e, AgentEnded)}
        assert ended[1] == "completed" and ended[2] == "failed" and ended[3] == "cancelled"
        assert [(e.stop_reason, e.waiting_reason) for e in events
                if isinstance(e, WorkflowEnded)] == [("waiting", "limit")]
        check_run_events(events, run.id)

        limited.limited = False
        limited.paid.clear()
        async with make_engine(config, limited.provider, store) as engine:
            again = engine.start(WorkflowStartRequest(meta=META, script=SCRIPT,
                                                      resume_from=run.id))
            done = await again.result()
            await again.dispose()
    assert done.stop_reason == "completed"
    assert done.value == {"a": "ONE", "b": "LIMITED TWO", "c": "SLOW THREE"}
    assert sorted(limited.paid) == ["limited two", "slow three"]  # "one" is not paid again
    assert done.agents_replayed == 1


async def test_on_limit_fail_keeps_the_childs_failure(make_engine: Any, tmp_path: Path) -> None:
    failure = SubagentResult(stop_reason="error", error="usage limit reached",
                             error_kind="limit", retry_at=datetime.now(UTC) + timedelta(hours=5))
    limited = Limited(failure)
    async with SQLiteRunStore(tmp_path / "runs.sqlite3") as store, \
            make_engine(EngineConfig(on_limit="fail"), limited.provider, store) as engine:
        run = engine.start(WorkflowStartRequest(meta=META, script=SCRIPT))
        result = await run.result()
        await run.dispose()
    assert result.stop_reason == "completed"
    assert result.value == {"a": "ONE", "b": None, "c": "SLOW THREE"}
    assert result.agents_failed == 1

"""first() in durable runs (docs/scripts.md, "Failure-aware combinators"): the winner is
journaled, and a resume answers it without starting any loser.

Both engines and both async backends, against a real SQLite file.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from _support import ENGINE_SKIPS, subprocess_factory

from dsh_workflow import (
    AgentReplayed,
    AgentStarted,
    EngineConfig,
    QuickJSEngine,
    SQLiteRunStore,
    SubagentRequest,
    SubagentResult,
    WorkflowEvent,
    WorkflowResult,
    WorkflowStartRequest,
)
from dsh_workflow.testing import GatedProvider, check_run_events

META = {"name": "race", "description": "first() in a durable run"}

RACE = """
const w = await first([() => agent('a'), () => agent('b'), () => agent('c')]);
return {w, after: await agent('after ' + w)};"""


def _factory(name: str) -> Any:
    if name == "quickjs":
        return lambda provider, store: QuickJSEngine(EngineConfig(), provider=provider,
                                                     store=store)
    if subprocess_factory(pool_size=1) is None:
        return None
    from dsh_workflow import SubprocessEngine

    return lambda provider, store: SubprocessEngine(EngineConfig(), provider=provider,
                                                    store=store, pool_size=1)


ENGINES = {"quickjs": _factory("quickjs"), "subprocess": _factory("subprocess")}


@pytest.fixture(params=sorted(ENGINES))
def make_engine(request: pytest.FixtureRequest) -> Any:
    factory = ENGINES[request.param]
    if factory is None:
        pytest.skip(ENGINE_SKIPS.get(request.param, "engine unavailable"))
    return factory


async def _race(make_engine: Any, path: Path, provider: Any, *, winner: int | None = None,
                **request: Any) -> tuple[str, WorkflowResult, list[WorkflowEvent]]:
    """Run RACE; with ``winner``, a gated provider's child ``winner`` (seq) is let finish
    once all three race, then every later child."""
    events: list[WorkflowEvent] = []
    async with SQLiteRunStore(path) as store, make_engine(provider, store) as engine:
        engine.events.subscribe(events.append)
        run = engine.start(WorkflowStartRequest(meta=META, script=RACE, **request))
        with anyio.fail_after(20):
            if winner is not None:
                assert isinstance(provider, GatedProvider)
                await provider.wait_running(3)
                provider.release(winner)
                await provider.wait_started(4)
                provider.release_all()
            result = await run.result()
        await run.dispose()
    check_run_events(events, run, result)
    return run.id, result, events


@pytest.mark.anyio
async def test_a_resume_answers_the_journaled_winner_and_starts_no_loser(
        make_engine: Any, tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    first_id, result, _ = await _race(make_engine, path, GatedProvider(), winner=3)
    assert result.value == {"w": "ok:c", "after": "ok:after ok:c"}
    async with SQLiteRunStore(path) as store:
        races = await store.journal(first_id, kind="race")
    assert [(e.seq, e.number) for e in races] == [(1, 2.0)]

    # Live, a would now win at once; the resume must still answer c, and start nothing.
    provider = GatedProvider()
    provider.release_all()
    second_id, resumed, events = await _race(make_engine, path, provider,
                                             resume_from=first_id)
    assert resumed.value == result.value
    assert provider.requests == []
    assert [e.seq for e in events if isinstance(e, AgentReplayed)] == [1, 2]
    assert not [e for e in events if isinstance(e, AgentStarted)]
    async with SQLiteRunStore(path) as store:
        races = await store.journal(second_id, kind="race")
    assert [(e.seq, e.number) for e in races] == [(1, 2.0)]  # a resume of the resume, too


@pytest.mark.anyio
async def test_a_journaled_winner_that_no_longer_wins_lets_the_others_race(
        make_engine: Any, tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    first_id, result, _ = await _race(make_engine, path, GatedProvider(), winner=2)
    assert result.value["w"] == "ok:b"

    def answers(request: SubagentRequest) -> SubagentResult:
        if request.prompt == "b":
            return SubagentResult(stop_reason="error", error="b is down now")
        return SubagentResult(text="live " + request.prompt)

    provider = GatedProvider(answers)  # the same provider identity: the journal applies
    provider.release_all()
    # b (seq 2 of the first run) runs live again, and fails: a and c race live.
    _, resumed, events = await _race(make_engine, path, provider, resume_from=first_id,
                                     rerun=frozenset({2}))
    assert resumed.value["w"] in ("live a", "live c")
    assert provider.prompts[0] == "b" and sorted(provider.prompts[1:3]) == ["a", "c"]
    assert not [e for e in events if isinstance(e, AgentReplayed)]

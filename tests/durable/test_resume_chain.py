"""Resuming a resume that stopped early (docs/durable-runs.md, "What replays"): what the runs
before it journaled is neither paid for nor asked again. Found by the crash-and-replay oracle
(tests/durable/oracle/); here the middle run stops by throwing, which leaves its journal as
short as a kill -9 would. Both engines, both backends, a real SQLite file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from _support import ENGINE_SKIPS, subprocess_factory

from dsh_workflow import (
    EngineConfig,
    QuestionAsked,
    QuickJSEngine,
    SQLiteRunStore,
    WorkflowEvent,
    WorkflowResult,
    WorkflowStartRequest,
)
from dsh_workflow.testing import AutoAnswer, FunctionProvider, check_run_events

pytestmark = pytest.mark.anyio

META = {"name": "chain", "description": "resumes of resumes"}

SCRIPT = """
const out = [await agent('first')];
out.push(await ask('Colour?', {choices: ['red', 'blue']}));
out.push(await checkpoint('Go on?'));
if (args.stop) throw new Error('stopped');
out.push(await ask('Name?'));
out.push(await agent('last'));
return out;"""

ANSWERS = {"Colour?": "blue", "Go on?": True, "Name?": "Ada"}


def _engines() -> dict[str, Any]:
    engines: dict[str, Any] = {"quickjs": QuickJSEngine, "subprocess": None}
    if subprocess_factory(pool_size=1) is not None:
        from dsh_workflow import SubprocessEngine

        engines["subprocess"] = lambda *a, **kw: SubprocessEngine(*a, pool_size=1, **kw)
    return engines


ENGINES = _engines()


@pytest.fixture(params=sorted(ENGINES))
def make_engine(request: pytest.FixtureRequest) -> Any:
    factory = ENGINES[request.param]
    if factory is None:
        pytest.skip(ENGINE_SKIPS.get(request.param, "engine unavailable"))
    return factory


async def _run(make_engine: Any, path: Path, answers: AutoAnswer, prompts: list[str], *,
               stop: bool = False, resume_from: str | None = None) -> tuple[str, WorkflowResult]:
    events: list[WorkflowEvent] = []

    def reply(request: Any) -> str:
        prompt: str = request.prompt
        prompts.append(prompt)
        return "answer " + prompt

    async with SQLiteRunStore(path) as store:
        async with make_engine(EngineConfig(), provider=FunctionProvider(reply), store=store,
                               answers=answers) as engine:
            engine.events.subscribe(events.append)
            run = engine.start(WorkflowStartRequest(meta=META, script=SCRIPT,
                                                    args={"stop": stop},
                                                    resume_from=resume_from))
            with anyio.fail_after(20):
                result = await run.result()
            await run.dispose()
    check_run_events(events, run, result)
    return run.id, result


async def test_a_resume_of_a_resume_that_stopped_early_asks_and_pays_nothing_again(
        make_engine: Any, tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    prompts: list[str] = []
    first, one = await _run(make_engine, path, AutoAnswer(ANSWERS), prompts)
    assert one.value == ["answer first", "blue", True, "Ada", "answer last"]
    # the second run replays the first three calls, then its script throws: it never reaches
    # "Name?" or "last", so its own journal lacks them
    second, two = await _run(make_engine, path, AutoAnswer(ANSWERS), prompts, stop=True,
                             resume_from=first)
    assert two.stop_reason == "error" and two.agents_replayed == 1
    async with SQLiteRunStore(path) as store:
        assert len(await store.question_records(second)) == 2
    prompts.clear()
    asked = AutoAnswer(ANSWERS)
    _, three = await _run(make_engine, path, asked, prompts, resume_from=second)
    assert three.value == one.value
    assert prompts == [], "an answer the first run journaled was paid for again"
    assert [q.question for q in asked.asked] == [], "a journaled answer was asked again"
    assert three.agents_replayed == 2


async def test_an_open_question_of_a_later_run_takes_an_earlier_runs_answer(
        make_engine: Any, tmp_path: Path) -> None:
    """A resume killed after re-asking a replayed question but before journaling its answer
    again holds it open; the next resume takes the answer the run before it journaled."""
    path = tmp_path / "runs.sqlite3"
    prompts: list[str] = []
    first, _ = await _run(make_engine, path, AutoAnswer(ANSWERS), prompts)
    async with SQLiteRunStore(path) as store:
        earlier = await store.question_records(first)
        # what such a resume leaves: a run resumed from the first, its questions open
        await store.create_run("killed", meta=META, script=SCRIPT, args={"stop": False},
                               resumed_from=first)
        for record in earlier:
            store.post_question("killed", record.question, record.key)
        await store.flush()
        assert all(not r.answered for r in await store.question_records("killed"))
    events: list[WorkflowEvent] = []
    asked = AutoAnswer(ANSWERS)
    async with SQLiteRunStore(path) as store:
        async with make_engine(EngineConfig(), provider=FunctionProvider(), store=store,
                               answers=asked) as engine:
            engine.events.subscribe(events.append)
            run = engine.start(WorkflowStartRequest(meta=META, script=SCRIPT,
                                                    args={"stop": False},
                                                    resume_from="killed"))
            with anyio.fail_after(20):
                result = await run.result()
            await run.dispose()
    assert result.stop_reason == "completed", result.error
    assert asked.asked == [] and not [e for e in events if isinstance(e, QuestionAsked)]

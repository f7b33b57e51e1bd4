"""Replay validates (docs/durable-runs.md): an answer replayed from the journal passes the checks a
live answer passes — the call's schema and ``max_value_depth`` — and one that does not (the
journal was altered, or written under other rules) runs live instead of reaching the script.
Both engines, both backends, a real SQLite file altered with ``sqlite3``."""

from __future__ import annotations

import json
import sqlite3
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
    WorkflowStartRequest,
)
from dsh_workflow.testing import FunctionProvider, check_run_events

pytestmark = pytest.mark.anyio

META = {"name": "replay-validates", "description": "replayed answers are checked"}
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
#: Four calls: two with the schema, one without, one more with it; the script returns them all.
SCRIPT = """
const [a, b] = await Promise.all([agent('a', {schema: args.schema}),
                                  agent('b', {schema: args.schema})]);
const t = await agent('text please');
const c = await agent('c', {schema: args.schema});
return [a, b, t, c];
"""


def _quickjs(config: EngineConfig, provider: Any, store: Any) -> Any:
    return QuickJSEngine(config, provider=provider, store=store)


def _subprocess(config: EngineConfig, provider: Any, store: Any) -> Any:
    from dsh_workflow import SubprocessEngine

    return SubprocessEngine(config, provider=provider, store=store, pool_size=1)


@pytest.fixture(params=["quickjs", "subprocess"])
def make_engine(request: pytest.FixtureRequest) -> Any:
    if request.param == "subprocess" and subprocess_factory(1) is None:
        pytest.skip(ENGINE_SKIPS["subprocess"])
    return _quickjs if request.param == "quickjs" else _subprocess


class Model:
    """Answers ``{"n": <calls so far>}`` to schema calls and ``live <prompt>`` to the others."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def __call__(self, request: SubagentRequest) -> SubagentResult:
        self.prompts.append(request.prompt)
        if request.schema is not None:
            return SubagentResult(structured={"n": len(self.prompts)})
        return SubagentResult(text=f"live {request.prompt}")


async def run(make_engine: Any, path: Path, model: Model, *, resume_from: str | None = None,
              config: EngineConfig | None = None) -> tuple[str, Any, list[WorkflowEvent]]:
    events: list[WorkflowEvent] = []
    async with SQLiteRunStore(path) as store, \
            make_engine(config or EngineConfig(), FunctionProvider(model), store) as engine:
        engine.events.subscribe(events.append)
        handle = engine.start(WorkflowStartRequest(meta=META, script=SCRIPT,
                                                   args={"schema": SCHEMA},
                                                   resume_from=resume_from))
        with anyio.fail_after(30):
            result = await handle.result()
        await handle.dispose()
    check_run_events(events, handle, result)
    return handle.id, result, [e for e in events if getattr(e, "run", None)
                               and e.run.id == handle.id]


def alter(path: Path, run_id: str, seq: int, **columns: Any) -> None:
    """Overwrite columns of one journal entry, as a corrupted or tampered file would hold."""
    sets = ", ".join(f"{name} = ?" for name in columns)
    with sqlite3.connect(path) as conn:
        changed = conn.execute(f"UPDATE journal SET {sets} WHERE run_id = ? AND kind = 'agent' "
                               "AND seq = ?", (*columns.values(), run_id, seq)).rowcount
    assert changed == 1


def nested(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth - 1):
        value = [value]
    return {"n": 7, "deep": value}


async def test_valid_answers_replay_and_altered_ones_run_live(make_engine: Any,
                                                              tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    model = Model()
    first, result, _ = await run(make_engine, path, model)
    assert result.stop_reason == "completed", result.error
    assert result.value == [{"n": 1}, {"n": 2}, "live text please", {"n": 4}]
    # call 1 no longer satisfies the schema; call 3 (no schema) lost its text; 2 and 4 are fine
    alter(path, first, 1, structured=json.dumps({"n": "one"}))
    alter(path, first, 3, text=None, structured=json.dumps("not text"))
    model.prompts.clear()
    second, resumed, events = await run(make_engine, path, model, resume_from=first)
    assert resumed.stop_reason == "completed", resumed.error
    assert sorted(model.prompts) == ["a", "text please"]  # only the two altered calls ran live
    assert resumed.value[1:] == [{"n": 2}, "live text please", {"n": 4}]
    assert resumed.value[0]["n"] in (1, 2)  # a live answer, never the altered "one"
    assert resumed.agents_replayed == 2 and resumed.agents_started == 2
    assert sorted(e.seq for e in events if isinstance(e, AgentReplayed)) == [2, 4]
    assert sorted(e.seq for e in events if isinstance(e, AgentStarted)) == [1, 3]
    # the live answers are journaled for the next resume, which replays everything
    model.prompts.clear()
    _, third, _ = await run(make_engine, path, model, resume_from=second)
    assert model.prompts == [] and third.agents_replayed == 4
    assert third.value == resumed.value


async def test_a_journaled_answer_deeper_than_max_value_depth_runs_live(
        make_engine: Any, tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    model = Model()
    config = EngineConfig(max_value_depth=16)
    first, result, _ = await run(make_engine, path, model, config=config)
    assert result.stop_reason == "completed", result.error
    alter(path, first, 2, structured=json.dumps(nested(40)))  # valid for the schema, too deep
    alter(path, first, 4, structured=json.dumps(nested(10)))  # within the depth: replayed
    model.prompts.clear()
    _, resumed, _ = await run(make_engine, path, model, resume_from=first, config=config)
    assert resumed.stop_reason == "completed", resumed.error
    assert model.prompts == ["b"]
    assert resumed.value[3] == nested(10)
    assert resumed.value[1] == {"n": 1}  # b's live answer
    assert resumed.agents_replayed == 3


async def test_a_journaled_schema_answer_that_is_missing_runs_live(make_engine: Any,
                                                                   tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    model = Model()
    first, _, _ = await run(make_engine, path, model)
    alter(path, first, 4, structured=None, text="plain text where an object belongs")
    model.prompts.clear()
    _, resumed, _ = await run(make_engine, path, model, resume_from=first)
    assert model.prompts == ["c"] and resumed.value[3] == {"n": 1}


async def test_a_parallel_fan_out_keeps_call_order_when_some_replays_fail(
        make_engine: Any, tmp_path: Path) -> None:
    script = ("return await parallel(Array.from({length: 30}, (_, i) => "
              "() => agent('item ' + i, {schema: args.schema})));")
    path = tmp_path / "runs.sqlite3"
    prompts: list[str] = []

    def model(request: SubagentRequest) -> SubagentResult:
        prompts.append(request.prompt)
        return SubagentResult(structured={"n": int(request.prompt.split()[1])})

    async def go(resume_from: str | None) -> tuple[str, Any, list[WorkflowEvent]]:
        events: list[WorkflowEvent] = []
        async with SQLiteRunStore(path) as store, \
                make_engine(EngineConfig(), FunctionProvider(model), store) as engine:
            engine.events.subscribe(events.append)
            handle = engine.start(WorkflowStartRequest(meta=META, script=script,
                                                       args={"schema": SCHEMA},
                                                       resume_from=resume_from))
            with anyio.fail_after(30):
                result = await handle.result()
            await handle.dispose()
        check_run_events(events, handle, result)
        return handle.id, result, events

    first, result, _ = await go(None)
    assert result.value == [{"n": i} for i in range(30)]
    for seq in range(1, 31, 3):
        alter(path, first, seq, structured=json.dumps({"n": None}))
    prompts.clear()
    _, resumed, events = await go(first)
    assert resumed.value == [{"n": i} for i in range(30)]
    live = [seq for seq in range(1, 31) if seq % 3 == 1]
    assert prompts == [f"item {seq - 1}" for seq in live]  # entered in call order
    assert [e.seq for e in events if isinstance(e, AgentStarted)] == live
    assert sorted(e.seq for e in events if isinstance(e, AgentReplayed)) == \
        [seq for seq in range(1, 31) if seq not in live]
    assert resumed.agents_replayed == 20 and resumed.agents_started == 10

"""Durable runs (docs/durable-runs.md): records, the journal, content-addressed replay, determinism.

Every test runs on both engines and both async backends, against a real SQLite file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from _support import ENGINE_SKIPS, quickjs_factory, subprocess_factory

from dsh_workflow import (
    AgentReplayed,
    AgentStarted,
    EngineConfig,
    QuickJSEngine,
    SQLiteRunStore,
    SubagentRequest,
    SubagentResult,
    Usage,
    WorkflowError,
    WorkflowErrorCode,
    WorkflowEvent,
    WorkflowStartRequest,
)
from dsh_workflow.testing import FunctionProvider, check_run_events

META = {"name": "durable-test", "description": "durable runs"}
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def _factory(name: str) -> Any:
    if name == "quickjs":
        return lambda config, provider, store: QuickJSEngine(config, provider=provider,
                                                             store=store)
    make = subprocess_factory(pool_size=1)
    if make is None:
        return None
    from dsh_workflow import SubprocessEngine

    return lambda config, provider, store: SubprocessEngine(config, provider=provider,
                                                            store=store, pool_size=1)


ENGINES = {"quickjs": _factory("quickjs"), "subprocess": _factory("subprocess")}
assert quickjs_factory is not None


@pytest.fixture(params=sorted(ENGINES))
def make_engine(request: pytest.FixtureRequest) -> Any:
    factory = ENGINES[request.param]
    if factory is None:
        pytest.skip(ENGINE_SKIPS.get(request.param, "engine unavailable"))
    return factory


class Model:
    """An obedient provider that counts: ``fail:`` prompts fail, schema calls get ``{n}``."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    def __call__(self, request: SubagentRequest) -> SubagentResult:
        self.prompts.append(request.prompt)
        if request.prompt.startswith("fail:"):
            return SubagentResult(stop_reason="error", error="no",
                                  usage=Usage(input_tokens=1, output_tokens=1))
        if request.schema is not None:
            return SubagentResult(structured={"n": len(self.prompts)},
                                  usage=Usage(input_tokens=2, output_tokens=3))
        return SubagentResult(text=f"{request.prompt}#{len(self.prompts)}",
                              usage=Usage(input_tokens=2, output_tokens=3))


class Session:
    """One store file and engine; runs scripts and keeps every event."""

    def __init__(self, make_engine: Any, path: Path, model: Model,
                 config: EngineConfig | None = None) -> None:
        self.make_engine = make_engine
        self.path = path
        self.model = model
        self.config = config or EngineConfig()
        self.events: list[WorkflowEvent] = []

    async def run(self, script: str, *, args: Any = None, resume_from: str | None = None,
                  **request: Any) -> tuple[str, Any]:
        async with SQLiteRunStore(self.path) as store:
            async with self.make_engine(self.config, FunctionProvider(self.model),
                                        store) as engine:
                engine.events.subscribe(self.events.append)
                run = engine.start(WorkflowStartRequest(meta=META, script=script, args=args,
                                                        resume_from=resume_from, **request))
                with anyio.fail_after(20):
                    result = await run.result()
                await run.dispose()
        check_run_events(self.events, run, result)
        return run.id, result

    def replayed(self, run_id: str) -> list[AgentReplayed]:
        return [e for e in self.events if isinstance(e, AgentReplayed) and e.run.id == run_id]

    async def store(self) -> SQLiteRunStore:
        store = SQLiteRunStore(self.path)
        await store.open()
        return store


LOOP = """
const out = [];
for (const p of args.prompts) out.push(await agent(p, {label: 'L ' + p}));
return out;"""


@pytest.mark.anyio
async def test_a_run_is_recorded_with_its_events_and_journal(make_engine: Any,
                                                            tmp_path: Path) -> None:
    session = Session(make_engine, tmp_path / "runs.sqlite3", Model())
    run_id, result = await session.run(LOOP + "\n// v1", args={"prompts": ["a", "fail:b", "c"]})
    assert result.value == ["a#1", None, "c#3"]
    store = await session.store()
    try:
        record = await store.get_run(run_id)
        assert record is not None and record.status == "completed"
        assert record.meta["name"] == "durable-test" and record.script.endswith("// v1")
        assert record.args == {"prompts": ["a", "fail:b", "c"]}
        assert record.result is not None and record.result["value"] == ["a#1", None, "c#3"]
        assert record.agents == 3 and record.usage.total_tokens == 12
        assert record.ended_at is not None and record.ended_at >= record.created_at
        kinds = [event.data["event"] for event in await store.events(run_id)]
        assert kinds[0] == "WorkflowStarted" and kinds[-1] == "WorkflowEnded"
        assert kinds.count("AgentStarted") == 3 and kinds.count("AgentEnded") == 3
        journal = await store.journal(run_id)
        assert [(e.kind, e.seq, e.text) for e in journal] == [("agent", 1, "a#1"),
                                                              ("agent", 3, "c#3")]
        assert journal[0].usage == Usage(input_tokens=2, output_tokens=3)
        assert len({e.key for e in journal}) == 2
    finally:
        await store.aclose()


class SlowEndStore(SQLiteRunStore):
    """A store whose end-of-run commit takes a while, as on a slow disk."""

    async def finish_run(self, run_id: str, **kwargs: Any) -> Any:
        await anyio.sleep(0.3)
        return await super().finish_run(run_id, **kwargs)


@pytest.mark.anyio
async def test_the_result_arrives_once_the_runs_end_is_committed(make_engine: Any,
                                                                 tmp_path: Path) -> None:
    """A caller may act on a result at once (print it, exit, be killed): by then the run reads
    ``completed`` in the store, never ``running`` or (after a crash) ``interrupted``."""
    path = tmp_path / "runs.sqlite3"
    async with SlowEndStore(path) as store:
        async with make_engine(EngineConfig(), FunctionProvider(Model()), store) as engine:
            run = engine.start(WorkflowStartRequest(meta=META, script="return await agent('a');"))
            with anyio.fail_after(20):
                result = await run.result()
            record = store.get_run_sync(run.id)
            assert result.value == "a#1"
            assert record is not None and record.status == "completed", record
            assert record.result is not None and record.result["value"] == "a#1"
            await run.dispose()


@pytest.mark.anyio
async def test_unchanged_script_replays_everything(make_engine: Any, tmp_path: Path) -> None:
    model = Model()
    session = Session(make_engine, tmp_path / "runs.sqlite3", model)
    args = {"prompts": ["a", "b", "c"]}
    first, one = await session.run(LOOP, args=args)
    model.prompts.clear()
    second, two = await session.run(LOOP, args=args, resume_from=first)
    assert two.value == one.value and two.stop_reason == "completed"
    assert model.prompts == [], "replayed calls must not reach the provider"
    assert two.agents_replayed == 3 and two.agents_started == 0
    assert two.usage == Usage(), "replayed calls cost nothing"
    replays = session.replayed(second)
    assert [(e.seq, e.label) for e in replays] == [(1, "L a"), (2, "L b"), (3, "L c")]
    assert not [e for e in session.events if isinstance(e, AgentStarted) and e.run.id == second]
    store = await session.store()
    try:
        record = await store.get_run(second)
        assert record is not None and record.resumed_from == first and record.replayed == 3
        assert len(await store.journal(second)) == 3, "replayed entries are journaled again"
    finally:
        await store.aclose()


@pytest.mark.anyio
async def test_schema_calls_replay_when_the_schema_is_new_to_the_process(
        make_engine: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A resume in a fresh process has no cached schema verdict: each call's schema goes
    through the gate's check, then its journaled answer through its own. Both must finish the
    call (this hung: the second check was dropped), in parallel and in a sequence."""
    from dsh_workflow import _schema

    model = Model()
    session = Session(make_engine, tmp_path / "runs.sqlite3", model)
    script = """
const both = await parallel(['a', 'b'].map(p => () => agent(p, {schema: SCHEMA})));
const last = await agent('c', {schema: SCHEMA});
return [...both, last];""".replace("SCHEMA", json.dumps(SCHEMA))
    first, one = await session.run(script)
    assert one.stop_reason == "completed", one.error
    model.prompts.clear()
    monkeypatch.setattr(_schema, "_verdicts", type(_schema._verdicts)())
    second, two = await session.run(script, resume_from=first)
    assert two.stop_reason == "completed", two.error
    assert two.value == one.value and two.agents_replayed == 3
    assert model.prompts == [], "replayed calls must not reach the provider"
    assert [e.seq for e in session.replayed(second)] == [1, 2, 3]


@pytest.mark.anyio
async def test_an_edited_prompt_reruns_itself_and_what_depends_on_it(make_engine: Any,
                                                                     tmp_path: Path) -> None:
    model = Model()
    session = Session(make_engine, tmp_path / "runs.sqlite3", model)
    script = """
        const a = await agent('A');
        const b = await agent('B from ' + a);
        const c = await agent('C');
        return [a, b, c];"""
    first, one = await session.run(script)
    model.prompts.clear()
    edited = script.replace("agent('A')", "agent('A edited')")
    _, two = await session.run(edited, resume_from=first)
    assert model.prompts == ["A edited", "B from A edited#1"], model.prompts
    assert two.agents_replayed == 1  # only C
    assert two.value[2] == one.value[2]


@pytest.mark.anyio
async def test_duplicates_replay_by_occurrence_and_failures_rerun(make_engine: Any,
                                                                 tmp_path: Path) -> None:
    model = Model()
    session = Session(make_engine, tmp_path / "runs.sqlite3", model)
    first, one = await session.run(LOOP, args={"prompts": ["x", "x", "fail:y", "x"]})
    assert one.value == ["x#1", "x#2", None, "x#4"]
    model.prompts.clear()
    _, two = await session.run(LOOP, args={"prompts": ["x", "x", "fail:y", "x", "x"]},
                               resume_from=first)
    # three x answers replay in order; the failure and the fourth x run live
    assert two.value[:3] == ["x#1", "x#2", None] and two.value[3] == "x#4"
    assert model.prompts == ["fail:y", "x"]
    assert two.agents_replayed == 3


@pytest.mark.anyio
async def test_label_and_phase_are_ignored_but_schema_model_and_route_count(
        make_engine: Any, tmp_path: Path) -> None:
    model = Model()
    session = Session(make_engine, tmp_path / "runs.sqlite3", model)
    script = f"""
        phase('one');
        const a = await agent('same', {{label: 'first label'}});
        const b = await agent('typed', {{schema: {json.dumps(SCHEMA)}}});
        const c = await agent('modelled', {{model: 'm1'}});
        const d = await agent('routed', {{provider: 'r1'}});
        return [a, b, c, d];"""
    first, _ = await session.run(script)
    model.prompts.clear()
    relabelled = script.replace("'first label'", "'other label'").replace("'one'", "'two'")
    second, two = await session.run(relabelled, resume_from=first)
    assert model.prompts == [] and two.agents_replayed == 4
    assert session.replayed(second)[0].label == "other label"
    assert session.replayed(second)[0].phase == "two"
    model.prompts.clear()
    changed = (script.replace('"integer"', '"number"').replace("'m1'", "'m2'")
               .replace("'r1'", "'r2'"))
    _, three = await session.run(changed, resume_from=first)
    assert model.prompts == ["typed", "modelled", "routed"] and three.agents_replayed == 1


@pytest.mark.anyio
async def test_timed_out_children_rerun(make_engine: Any, tmp_path: Path) -> None:
    slow = {"on": True}

    async def reply(request: SubagentRequest) -> SubagentResult:
        if slow["on"] and request.prompt == "slow":
            await anyio.sleep(5)
        return SubagentResult(text="done:" + request.prompt)

    path = tmp_path / "runs.sqlite3"
    config = EngineConfig(agent_timeout_s=0.3)
    script = "return [await agent('fast'), await agent('slow')];"
    async with SQLiteRunStore(path) as store:
        async with make_engine(config, FunctionProvider(reply), store) as engine:
            run = engine.start(WorkflowStartRequest(meta=META, script=script))
            assert (await run.result()).value == ["done:fast", None]
            await run.dispose()
            slow["on"] = False
            again = engine.start(WorkflowStartRequest(meta=META, script=script,
                                                      resume_from=run.id))
            result = await again.result()
            await again.dispose()
    assert result.value == ["done:fast", "done:slow"] and result.agents_replayed == 1


@pytest.mark.anyio
async def test_clock_and_randomness_replay_then_go_live(make_engine: Any,
                                                        tmp_path: Path) -> None:
    model = Model()
    session = Session(make_engine, tmp_path / "runs.sqlite3", model)
    script = """
        const t = Date.now();
        const d = new Date();
        const s = Date();
        const r = [Math.random(), Math.random()];
        const answer = await agent('at ' + t + ' pick ' + r[0]);
        const extra = args && args.more ? [Math.random(), Date.now()] : [];
        return {t, d: d.getTime(), s, r, answer, extra, isDate: d instanceof Date,
                ctor: d.constructor === Date, parsed: new Date(0).getTime()};"""
    first, one = await session.run(script)
    assert one.value["isDate"] is True and one.value["ctor"] is True
    assert one.value["parsed"] == 0
    model.prompts.clear()
    await anyio.sleep(0.05)
    _, two = await session.run(script, args={"more": True}, resume_from=first)
    for key in ("t", "d", "s", "r", "answer"):
        assert two.value[key] == one.value[key], key
    assert model.prompts == [], "the prompt embeds the clock and the dice: it must replay"
    assert two.agents_replayed == 1
    live_random, live_clock = two.value["extra"]
    assert 0 <= live_random < 1 and live_clock >= one.value["t"]


@pytest.mark.anyio
async def test_resumes_chain(make_engine: Any, tmp_path: Path) -> None:
    model = Model()
    session = Session(make_engine, tmp_path / "runs.sqlite3", model)
    first, one = await session.run(LOOP, args={"prompts": ["a", "b"]})
    second, _ = await session.run(LOOP, args={"prompts": ["a", "b", "c"]}, resume_from=first)
    model.prompts.clear()
    _third, three = await session.run(LOOP, args={"prompts": ["a", "b", "c"]},
                                      resume_from=second)
    assert model.prompts == [] and three.agents_replayed == 3
    assert three.value[:2] == one.value


@pytest.mark.anyio
async def test_a_resume_that_stopped_early_still_replays_what_its_run_journaled(
        make_engine: Any, tmp_path: Path) -> None:
    """A resume journals its replayed answers only as its calls reach them; one that stopped
    before reaching them all (here its script throws; a kill -9 is the same) must not make the
    next resume pay for the rest: they come from the run it resumed (found by the
    crash-and-replay oracle, tests/durable/oracle/)."""
    model = Model()
    session = Session(make_engine, tmp_path / "runs.sqlite3", model)
    script = """
        const clock = [Date.now(), Date.now()];
        const out = [];
        for (const p of args.prompts) out.push(await agent(p));
        if (args.stop) throw new Error('stopped');
        return {out, clock};"""
    full = {"prompts": ["a", "b", "c", "b"]}
    first, one = await session.run(script, args=full)
    second, two = await session.run(script, args={"prompts": ["a"], "stop": True},
                                    resume_from=first)
    assert two.stop_reason == "error" and two.agents_replayed == 1
    async with SQLiteRunStore(session.path) as store:
        assert len(await store.journal(second, kind="agent")) == 1
    model.prompts.clear()
    await anyio.sleep(0.05)  # a live clock would differ
    _, three = await session.run(script, args=full, resume_from=second)
    assert model.prompts == [], "answers the chain journaled were paid for again"
    assert three.agents_replayed == 4 and three.value == one.value


@pytest.mark.anyio
async def test_rerun_names_calls_of_the_run_resumed_not_of_its_ancestors(
        make_engine: Any, tmp_path: Path) -> None:
    model = Model()
    session = Session(make_engine, tmp_path / "runs.sqlite3", model)
    first, _ = await session.run(LOOP, args={"prompts": ["a", "b"]})
    # the second run's seq 1 is "b"; the first run's seq 1 ("a") is not this rerun's
    second, _ = await session.run(LOOP, args={"prompts": ["b"]}, resume_from=first)
    model.prompts.clear()
    _, three = await session.run(LOOP, args={"prompts": ["a", "b"]}, resume_from=second,
                                 rerun=frozenset({1}))
    assert model.prompts == ["b"] and three.agents_replayed == 1


@pytest.mark.anyio
async def test_replays_count_toward_the_total_cap(make_engine: Any, tmp_path: Path) -> None:
    model = Model()
    session = Session(make_engine, tmp_path / "runs.sqlite3", model)
    first, _ = await session.run(LOOP, args={"prompts": ["a", "b", "c"]})
    _, capped = await session.run(LOOP, args={"prompts": ["a", "b", "c"]}, resume_from=first,
                                  max_total_agents=2)
    assert capped.stop_reason == "error" and capped.error_code == "AGENT_CAP" and capped.error.startswith("AGENT_CAP:")


@pytest.mark.anyio
async def test_resume_from_is_checked_at_start(make_engine: Any, tmp_path: Path) -> None:
    async with SQLiteRunStore(tmp_path / "runs.sqlite3") as store:
        async with make_engine(EngineConfig(), FunctionProvider(Model()), store) as engine:
            with pytest.raises(WorkflowError) as unknown:
                engine.start(WorkflowStartRequest(meta=META, script="return 1",
                                                  resume_from="no-such-run"))
            assert unknown.value.code == WorkflowErrorCode.INVALID_ARGUMENT
            assert "no-such-run" in str(unknown.value)
    async with make_engine(EngineConfig(), FunctionProvider(Model()), None) as engine:
        with pytest.raises(WorkflowError) as no_store:
            engine.start(WorkflowStartRequest(meta=META, script="return 1", resume_from="x"))
        assert no_store.value.code == WorkflowErrorCode.INVALID_ARGUMENT
        assert "store" in str(no_store.value)


@pytest.mark.anyio
async def test_a_run_from_another_store_is_unknown(make_engine: Any, tmp_path: Path) -> None:
    other = Session(make_engine, tmp_path / "other.sqlite3", Model())
    foreign, _ = await other.run("return 1")
    async with SQLiteRunStore(tmp_path / "runs.sqlite3") as store:
        async with make_engine(EngineConfig(), FunctionProvider(Model()), store) as engine:
            with pytest.raises(WorkflowError) as info:
                engine.start(WorkflowStartRequest(meta=META, script="return 1",
                                                  resume_from=foreign))
    assert info.value.code == WorkflowErrorCode.INVALID_ARGUMENT


@pytest.mark.anyio
async def test_cancelled_and_failed_runs_are_recorded(make_engine: Any, tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    entered = anyio.Event()

    async def hang(request: SubagentRequest) -> SubagentResult:
        entered.set()
        await anyio.sleep(30)
        return SubagentResult(text="never")

    async with SQLiteRunStore(path) as store:
        async with make_engine(EngineConfig(), FunctionProvider(hang), store) as engine:
            run = engine.start(WorkflowStartRequest(meta=META, script="await agent('x')"))
            with anyio.fail_after(30):
                await entered.wait()  # cancelled while its agent runs
            run.cancel("stop it")
            assert (await run.result()).stop_reason == "cancelled"
            await run.dispose()
            failing = engine.start(WorkflowStartRequest(meta=META,
                                                        script="throw new Error('boom')"))
            assert (await failing.result()).stop_reason == "error"
            await failing.dispose()
        cancelled = await store.get_run(run.id)
        errored = await store.get_run(failing.id)
    assert cancelled is not None and cancelled.status == "cancelled"
    assert errored is not None and errored.status == "error"
    assert errored.result is not None and "boom" in errored.result["error"]


def _is_open(store: SQLiteRunStore) -> bool:
    """The store's state as it is now: a type checker would keep an earlier ``is_open`` check
    as true across the block that closes it."""
    return store.is_open


@pytest.mark.anyio
async def test_the_engine_closes_a_store_it_opened(make_engine: Any, tmp_path: Path) -> None:
    store = SQLiteRunStore(tmp_path / "runs.sqlite3")
    async with make_engine(EngineConfig(), FunctionProvider(Model()), store) as engine:
        run = engine.start(WorkflowStartRequest(meta=META, script="return 7"))
        assert (await run.result()).value == 7
        await run.dispose()
        assert store.is_open
    assert not _is_open(store), "the engine opened the store, so it closes it"
    async with SQLiteRunStore(tmp_path / "runs.sqlite3") as mine:
        async with make_engine(EngineConfig(), FunctionProvider(Model()), mine):
            pass
        assert mine.is_open, "a store the caller opened stays open for the caller"

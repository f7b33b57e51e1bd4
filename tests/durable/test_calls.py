"""What each agent() call was asked and answered (docs/durable-runs.md, "Runs under control"): the store's
``calls`` rows written by both engines, the provider options a run records, rerun by seq, and
cancel requests from another store handle, against real SQLite files on both backends.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import anyio
import pytest
from _support import ENGINE_SKIPS, await_until, subprocess_factory

from dsh_workflow import (
    AgentRegistry,
    CallRecord,
    EchoProvider,
    EngineConfig,
    OpenAIProvider,
    QuickJSEngine,
    RoutingProvider,
    SQLiteRunStore,
    SubagentRequest,
    SubagentResult,
    Usage,
    WorkflowError,
    WorkflowErrorCode,
    WorkflowStartRequest,
)
from dsh_workflow._cli.calls import call_text
from dsh_workflow._engines.host.control import CANCEL_REASON
from dsh_workflow._provider_options import provider_options
from dsh_workflow._store import CallRow
from dsh_workflow.testing import FunctionProvider

META = {"name": "calls-test", "description": "calls are recorded"}
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer", "minimum": 5}},
          "required": ["n"]}


def _factory(name: str) -> Any:
    if name == "quickjs":
        return lambda config, provider, store, **kw: QuickJSEngine(
            config, provider=provider, store=store, **kw)
    if subprocess_factory(pool_size=1) is None:
        return None
    from dsh_workflow import SubprocessEngine

    return lambda config, provider, store, **kw: SubprocessEngine(
        config, provider=provider, store=store, pool_size=1, **kw)


ENGINES = {"quickjs": _factory("quickjs"), "subprocess": _factory("subprocess")}


@pytest.fixture(params=sorted(ENGINES))
def make_engine(request: pytest.FixtureRequest) -> Any:
    factory = ENGINES[request.param]
    if factory is None:
        pytest.skip(ENGINE_SKIPS.get(request.param, "engine unavailable"))
    return factory


def answer(request: SubagentRequest) -> SubagentResult:
    usage = Usage(input_tokens=3, output_tokens=4)
    if request.prompt.startswith("fail"):
        return SubagentResult(stop_reason="error", error="the model refused", text="nope",
                              usage=usage)
    if request.schema is not None:
        n = 1 if "small" in request.prompt else 7
        return SubagentResult(structured={"n": n}, text=f'{{"n": {n}}}', usage=usage)
    return SubagentResult(text="answer to " + request.prompt,
                          usage=usage.model_copy(update={"cost_usd": 0.0123}))


SCRIPT = """
phase("ask");
const a = await agent("plain question", {label: "plain", model: "fast", effort: "high"});
const b = await agent("typed question", {label: "typed", schema: args.schema,
                                          agentType: "reviewer", isolation: "worktree"});
const c = await agent("small typed question", {label: "invalid", schema: args.schema});
const d = await agent("fail please", {label: "failing"});
return [a, b, c, d];
"""


def _registry(tmp_path: Path) -> AgentRegistry:
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "reviewer.md").write_text(
        "---\nname: reviewer\ndescription: reviews things\nmodel: sonnet\n---\n"
        "You review with care.\n", encoding="utf-8")
    return AgentRegistry([folder])


async def _run(make_engine: Any, path: Path, script: str, *, provider: Any = None,
               config: EngineConfig | None = None, **request: Any) -> tuple[str, Any]:
    agents = request.pop("agents", None)
    async with SQLiteRunStore(path) as store:
        async with make_engine(config or EngineConfig(), provider or FunctionProvider(answer),
                               store, agents=agents) as engine:
            run = engine.start(WorkflowStartRequest(meta=META, script=script, **request))
            with anyio.fail_after(30):
                result = await run.result()
            await run.dispose()
    return run.id, result


@pytest.mark.anyio
async def test_every_call_is_recorded_with_its_request_and_answer(make_engine: Any,
                                                                  tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    config = EngineConfig(model_aliases={"fast": "model-f", "sonnet": "model-s"})
    run_id, result = await _run(make_engine, path, SCRIPT, config=config,
                                args={"schema": SCHEMA}, agents=_registry(tmp_path))
    assert result.value == ["answer to plain question", {"n": 7}, None, None]
    async with SQLiteRunStore(path) as store:
        calls = await store.calls(run_id)
        assert [c.seq for c in calls] == [1, 2, 3, 4]
        assert all(isinstance(c, CallRecord) for c in calls)
        plain, typed, invalid, failing = calls
        assert (plain.label, plain.phase, plain.prompt) == ("plain", "ask", "plain question")
        assert plain.options["model"] == "model-f" and plain.model == "model-f"  # after aliases
        assert plain.options["effort"] == "high"
        assert plain.outcome == "completed" and plain.text == "answer to plain question"
        assert plain.usage == Usage(input_tokens=3, output_tokens=4, cost_usd=0.0123)
        assert "3 input + 4 output tokens, $0.0123" in call_text(plain)
        assert plain.started_at is not None and plain.ended_at is not None
        assert plain.ended_at >= plain.started_at and not plain.replayed
        assert plain.failure is None
        # the agent type's system prompt and model, the isolation and the schema
        assert typed.options["agent_type"] == "reviewer"
        assert typed.system_prompt is not None and "review with care" in typed.system_prompt
        assert typed.model == "model-s" and typed.options["isolation"] == "worktree"
        assert typed.options["schema"] == SCHEMA and typed.structured == {"n": 7}
        assert (typed.schema, typed.agent_type, typed.isolation) == (SCHEMA, "reviewer",
                                                                     "worktree")
        assert (plain.effort, plain.requested_model, plain.schema) == ("high", "model-f", None)
        assert typed.requested_model == "model-s"  # the definition's, after aliases
        assert plain.request == {"prompt": "plain question", **plain.options}
        # a structured value that failed validation is kept, with the reason
        assert invalid.outcome == "failed" and invalid.structured == {"n": 1}
        assert invalid.failure is not None and invalid.failure["kind"] == "invalid"
        assert failing.outcome == "failed" and failing.text == "nope"
        assert failing.failure is not None and failing.failure["kind"] == "provider"
        assert "the model refused" in failing.failure["message"]
        assert await store.call(run_id, 2) == typed
        assert await store.call(run_id, 9) is None
        assert await store.call("no-such-run", 1) is None
        assert [c.seq for c in await store.calls(run_id, after=1, limit=2)] == [2, 3]
        briefs = await store.call_briefs(run_id)  # the overview: no texts loaded
        assert [(b.seq, b.model, b.outcome) for b in briefs] == [
            (1, "model-f", "completed"), (2, "model-s", "completed"), (3, None, "failed"),
            (4, None, "failed")]
        assert briefs[3].failure == failing.failure and briefs[0].failure is None


@pytest.mark.anyio
async def test_replayed_calls_are_recorded_with_the_journal_answer(make_engine: Any,
                                                                  tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    script = 'return [await agent("one"), await agent("two", {label: "second"})];'
    first, _ = await _run(make_engine, path, script)
    second, result = await _run(make_engine, path, script.replace('"two"', '"two!"'),
                                resume_from=first)
    assert result.agents_replayed == 1
    async with SQLiteRunStore(path) as store:
        one, two = await store.calls(second)
    assert one.replayed and one.outcome == "completed" and one.text == "answer to one"
    assert one.started_at is None
    assert one.usage == Usage(input_tokens=3, output_tokens=4, cost_usd=0.0123)
    assert not two.replayed and two.prompt == "two!" and two.text == "answer to two!"


@pytest.mark.anyio
async def test_a_slow_call_can_be_read_while_it_runs(make_engine: Any, tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    entered = anyio.Event()

    async def slow(request: SubagentRequest) -> SubagentResult:
        entered.set()
        await anyio.sleep(30)
        return SubagentResult(text="late")

    async with SQLiteRunStore(path) as store:
        async with make_engine(EngineConfig(max_concurrent_agents=1), FunctionProvider(slow),
                               store) as engine:
            run = engine.start(WorkflowStartRequest(meta=META, script=(
                'return await parallel([() => agent("the slow one", {label: "slow"}), '
                '() => agent("the queued one", {label: "queued"})]);')))
            with anyio.fail_after(10):
                await entered.wait()
            async with SQLiteRunStore(path) as reader:  # another handle, as another process

                async def both_recorded() -> list[CallRecord]:
                    calls = await reader.calls(run.id)
                    return calls if len(calls) >= 2 else []

                calls = await await_until(both_recorded, what="both calls in the store",
                                          timeout=10)
            running, queued = calls
            assert running.prompt == "the slow one" and running.outcome is None
            assert running.started_at is not None
            assert queued.prompt == "the queued one" and queued.started_at is None
            run.cancel("enough")
            await run.result()
            await run.dispose()
        calls = await store.calls(run.id)
    assert [c.outcome for c in calls] == ["cancelled", "cancelled"]
    assert calls[1].started_at is None and calls[1].failure is not None


@pytest.mark.anyio
async def test_rerun_runs_the_named_calls_live_and_replays_the_rest(make_engine: Any,
                                                                    tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    counter = {"n": 0}

    def counting(request: SubagentRequest) -> SubagentResult:
        counter["n"] += 1
        return SubagentResult(text=f"{request.prompt}#{counter['n']}")

    script = """
const a = await agent("a");
const b = await agent("b");
const c = await agent("c uses " + b);
return [a, b, c];"""
    first, result = await _run(make_engine, path, script, provider=FunctionProvider(counting))
    assert result.value == ["a#1", "b#2", "c uses b#2#3"]
    _, result = await _run(make_engine, path, script, provider=FunctionProvider(counting),
                                resume_from=first, rerun=frozenset({2}))
    # b ran live again, c depends on its new answer, a was replayed
    assert result.value == ["a#1", "b#4", "c uses b#4#5"]
    assert result.agents_replayed == 1
    with pytest.raises(WorkflowError) as caught:
        WorkflowStartRequest(meta=META, script=script, rerun=frozenset({2}))
        async with SQLiteRunStore(path) as store, make_engine(
                EngineConfig(), FunctionProvider(counting), store) as engine:
            engine.start(WorkflowStartRequest(meta=META, script=script, rerun=frozenset({2})))
    assert caught.value.code == WorkflowErrorCode.INVALID_ARGUMENT
    assert "resume_from" in caught.value.message


@pytest.mark.anyio
async def test_another_handle_cancels_a_running_run(make_engine: Any, tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    entered = anyio.Event()

    async def slow(request: SubagentRequest) -> SubagentResult:
        entered.set()
        await anyio.sleep(30)
        return SubagentResult(text="late")

    async with SQLiteRunStore(path) as store:
        async with make_engine(EngineConfig(), FunctionProvider(slow), store) as engine:
            run = engine.start(WorkflowStartRequest(meta=META, script='return await agent("x");'))
            with anyio.fail_after(10):
                await entered.wait()
            async with SQLiteRunStore(path) as other:
                asked = anyio.current_time()
                assert await other.request_cancel(run.id) is True
                with anyio.fail_after(5):
                    result = await run.result()
                noticed = anyio.current_time() - asked
            await run.dispose()
        assert result.stop_reason == "cancelled"
        assert result.error is not None and CANCEL_REASON in result.error
        assert noticed < 0.5 + 0.3, noticed  # the poll period plus slack on a busy machine
        record = await store.get_run(run.id)
        assert record is not None and record.status == "cancelled"
        assert await store.request_cancel(run.id) is False  # no longer running
        assert await store.request_cancel("no-such-run") is False


@pytest.mark.anyio
async def test_the_run_records_its_provider_options_without_secrets(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    secret = "sk-live-abcdefghijklmnop1234"
    openai = OpenAIProvider(base_url="http://user:hunter2pass@127.0.0.1:9/v1", api_key=secret,
                            model="gpt-test")
    routing = RoutingProvider({"main": EchoProvider(latency_s=0.01), "big": openai},
                              default="main")
    run_id, _ = await _run(lambda c, p, s, **kw: QuickJSEngine(c, provider=p, store=s, **kw),
                           path, 'return await agent("x");', provider=routing)
    async with SQLiteRunStore(path) as store:
        recorded = await store.provider(run_id)
        assert await store.provider("no-such-run") is None
        calls = await store.calls(run_id)
    assert recorded is not None and recorded["kind"] == "routing"
    assert recorded["default"] == "main"
    assert recorded["routes"]["main"] == {"kind": "echo", "latency_s": 0.01}
    big = recorded["routes"]["big"]
    assert big["kind"] == "openai" and big["model"] == "gpt-test"
    assert "hunter2pass" not in big["base_url"] and "127.0.0.1:9/v1" in big["base_url"]
    assert recorded["identity"] == provider_options(routing)["identity"]
    assert calls[0].model is None  # echo has no model

    for name in ("runs.sqlite3", "runs.sqlite3-wal"):
        file = tmp_path / name
        if file.exists():
            data = file.read_bytes()
            assert secret.encode() not in data and b"hunter2pass" not in data


def test_a_command_line_secret_is_not_recorded() -> None:
    from dsh_workflow import CommandProvider

    recorded = provider_options(CommandProvider(["agent", "--api-key", "abc123secret",
                                                 "--token=xyz987", "--model", "m1"]))
    assert recorded["command"] == ["agent", "--api-key", "[REDACTED]", "--token=[REDACTED]",
                                   "--model", "m1"]
    assert "abc123secret" not in recorded["identity"] and "xyz987" not in recorded["identity"]
    assert recorded["kind"] == "command"


@pytest.mark.anyio
async def test_a_later_row_of_the_same_call_replaces_the_earlier_one(tmp_path: Path) -> None:
    path = tmp_path / "runs.sqlite3"
    async with SQLiteRunStore(path) as store:
        await store.create_run("r1", meta=META, script="return 1;")
        store.post_calls([CallRow("r1", 1, "first", None, '{"prompt": "p"}'),
                          CallRow("r1", 2, "second", "ph", '{"prompt": "q"}')])
        await store.flush()
        store.post_calls([CallRow("r1", 1, "first", None, '{"prompt": "p"}', 1.0, 2.0,
                                  "completed", "done", None, None, '{"input_tokens": 5}')])
        store.post_calls([CallRow("r1", 2, "second", "ph", '{"prompt": "q"}', 1.5, 2.5,
                                  "failed", None, None, '{"kind": "provider"}')])
        await store.flush()
        first, second = await store.calls("r1")
    assert (first.outcome, first.text, first.usage) == ("completed", "done",
                                                         Usage(input_tokens=5))
    assert first.prompt == "p" and first.options == {}
    assert (second.outcome, second.failure, second.phase) == ("failed", {"kind": "provider"},
                                                             "ph")
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT count(*) FROM calls").fetchone()[0] == 2

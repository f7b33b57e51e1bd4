"""``WorkflowResult.error_code``: the code of a failed run as data (issue 13, deliverable 4).

Every non-completed result carries a code, equal to the ``CODE:`` its text starts with; texts
without a prefix (a cancel, the script's own error, a stall, the engine failing) have the codes
of the table in ``dsh_workflow._errors``. Checked on both engines, on both async backends: one
run per way a run can end; then the model's rules (with Hypothesis), the store's round trip
(and its rows written before the field), and the consumers (tool, background status, viewer).
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from _support import TIGHT_CONFIG, await_until, both_engines, quickjs_factory
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from dsh_workflow import (
    AgentStarted,
    EngineConfig,
    QuickJSEngine,
    SQLiteRunStore,
    SubagentRequest,
    SubagentResult,
    WorkflowEngine,
    WorkflowErrorCode,
    WorkflowEvent,
    WorkflowResult,
    WorkflowStartRequest,
    WorkflowTool,
)
from dsh_workflow._errors import ENGINE_FAILED, SCRIPT_FAILED
from dsh_workflow._result import code_in_text, stored_code, with_error_code
from dsh_workflow._store import RunRecord
from dsh_workflow._ui.summary import error_view
from dsh_workflow.testing import check_run_events

pytestmark = pytest.mark.anyio

META = {"name": "error-code", "description": "error codes as data"}
CONFIG = TIGHT_CONFIG
ENGINES = both_engines()
Code = WorkflowErrorCode


async def _reply(request: SubagentRequest) -> SubagentResult:
    if request.prompt == "raise":
        raise RuntimeError("provider exploded")
    if request.prompt == "hang":
        await anyio.sleep_forever()
    return SubagentResult(stop_reason="completed", text="ok:" + request.prompt,
                          usage={"input_tokens": 5, "output_tokens": 5})


class _Provider:
    async def run(self, request: SubagentRequest) -> SubagentResult:
        return await _reply(request)


#: name -> (script, config overrides, the code, whether the text starts with it)
PATHS: dict[str, tuple[str, dict[str, Any], Code | None, bool]] = {
    "completed": ("return await agent('a')", {}, None, False),
    "script-throws": ("throw new Error('the script gave up')", {}, SCRIPT_FAILED, False),
    "script-throws-a-string": ("throw 'plain'", {}, SCRIPT_FAILED, False),
    "script-throws-null": ("throw null", {}, SCRIPT_FAILED, False),
    "script-throws-undefined": ("throw undefined", {}, SCRIPT_FAILED, False),
    "script-throws-a-look-alike": ("throw new Error('x'.replace('x', 'TIMEOUT: fake'))", {},
                                   SCRIPT_FAILED, False),
    "script-rejects-after-await": ("await agent('a'); return Promise.reject(new Error('no'))",
                                   {}, SCRIPT_FAILED, False),
    "stalled": ("await new Promise(() => {})", {}, SCRIPT_FAILED, False),
    "timeout": ("return await agent('hang')", {"run_timeout_s": 0.3}, Code.TIMEOUT, True),
    "agent-cap": ("await agent('a'); return await agent('b')", {"max_total_agents": 1},
                  Code.AGENT_CAP, True),
    "item-cap": ("return await parallel([1, 2, 3].map(i => () => agent('a' + i)))",
                 {"max_items_per_call": 2}, Code.ITEM_CAP, True),
    "invalid-argument": ("return await agent(42)", {}, Code.INVALID_ARGUMENT, True),
    "unsupported-option": ("return await agent('a', {bogus: 1})", {}, Code.UNSUPPORTED_OPTION,
                           True),
    "unsupported-schema": ("return await agent('a', {schema: {type: 'string'}})", {},
                           Code.UNSUPPORTED_SCHEMA, True),
    "agent-failed": ("return await agent('raise')", {}, Code.AGENT_FAILED, True),
    "budget-exceeded": ("await agent('a'); return await agent('b')", {"budget_tokens": 10},
                        Code.BUDGET_EXCEEDED, True),
    "unserializable": ("return 10n", {}, Code.RESULT_UNSERIALIZABLE, True),
    "slice": ("while (true) {}", {}, Code.RESOURCE_LIMIT, True),
    "stack": ("const f = n => f(n + 1) + 1; return f(0)", {}, Code.RESOURCE_LIMIT, True),
    "memory": ("const xs = []; while (true) xs.push('x'.repeat(1 << 16) + xs.length)", {},
               Code.RESOURCE_LIMIT, True),
    "refused-calls": ("for (;;) { try { await agent('a', {bogus: 1}) } catch {} }",
                      {"max_refused_calls": 3}, Code.RESOURCE_LIMIT, True),
}


@asynccontextmanager
async def _engine(factory: Any, config: EngineConfig,
                  events: list[WorkflowEvent]) -> AsyncIterator[WorkflowEngine]:
    engine: AbstractAsyncContextManager[WorkflowEngine] = factory(config, _Provider())
    async with engine as eng:
        eng.events.subscribe(events.append)
        yield eng


def _assert_consistent(result: WorkflowResult) -> None:
    """The rules every result keeps, whatever ended it."""
    assert (result.error_code is None) == (result.stop_reason == "completed"), result
    if result.error is not None:
        assert code_in_text(result.error) in (None, result.error_code), result


@pytest.mark.parametrize("factory", ENGINES)
@pytest.mark.parametrize("name", list(PATHS))
async def test_every_way_a_run_ends_has_its_code(factory: Any, name: str) -> None:
    script, overrides, code, prefixed = PATHS[name]
    events: list[WorkflowEvent] = []
    async with _engine(factory, CONFIG.model_copy(update=overrides), events) as engine:
        run = engine.start(WorkflowStartRequest(meta=META, script=script))
        with anyio.fail_after(15):
            result = await run.result()
        await run.dispose()
    _assert_consistent(result)
    assert result.error_code == code, result
    if code is not None:
        assert result.error is not None
        assert result.error.startswith(f"{code}:") == prefixed, result
    check_run_events(events, run, result)  # WorkflowEnded carries the same code


@pytest.mark.parametrize("factory", ENGINES)
async def test_a_cancelled_run_has_the_code_cancelled(factory: Any) -> None:
    events: list[WorkflowEvent] = []
    async with _engine(factory, CONFIG, events) as engine:
        run = engine.start(WorkflowStartRequest(meta=META, script="return await agent('hang')"))
        await await_until(lambda: any(isinstance(e, AgentStarted) for e in events),
                          what="the run's child to start")
        run.cancel("enough")
        with anyio.fail_after(10):
            result = await run.result()
        await run.dispose()
    assert (result.stop_reason, result.error_code) == ("cancelled", Code.CANCELLED), result
    assert result.error == "workflow run cancelled: enough"  # the text keeps no prefix
    check_run_events(events, run, result)


@pytest.mark.parametrize("factory", ENGINES)
async def test_a_run_the_engine_shuts_down_has_the_code_cancelled(factory: Any) -> None:
    events: list[WorkflowEvent] = []
    async with _engine(factory, CONFIG, events) as engine:
        run = engine.start(WorkflowStartRequest(meta=META, script="return await agent('hang')"))
        await anyio.sleep(0.2)
    with anyio.fail_after(10):
        result = await run.result()
    assert (result.stop_reason, result.error_code) == ("cancelled", Code.CANCELLED), result


async def test_a_long_error_is_cut_but_keeps_its_code() -> None:
    config = CONFIG.model_copy(update={"max_error_chars": 200})
    async with QuickJSEngine(config, provider=_Provider()) as engine:
        run = engine.start(WorkflowStartRequest(meta=META, script="return await agent(42)"))
        short = await run.result()
        thrown = engine.start(WorkflowStartRequest(meta=META,
                                                   script="throw new Error('x'.repeat(500))"))
        own = await thrown.result()
    assert short.error_code == Code.INVALID_ARGUMENT and short.error is not None
    assert own.error_code == SCRIPT_FAILED and own.error is not None
    assert "[truncated:" in own.error


# ---- the model's rules ------------------------------------------------------------------------

def test_a_result_built_without_a_code_gets_it_from_its_text() -> None:
    assert WorkflowResult(stop_reason="completed", value=1).error_code is None
    assert WorkflowResult(stop_reason="error", error="TIMEOUT: late").error_code == Code.TIMEOUT
    assert WorkflowResult(stop_reason="cancelled", error="user").error_code == Code.CANCELLED
    assert WorkflowResult(stop_reason="error", error="Error: boom").error_code == SCRIPT_FAILED
    assert WorkflowResult(stop_reason="error", error="").error_code == SCRIPT_FAILED


@pytest.mark.parametrize("fields", [
    {"stop_reason": "completed", "value": 1, "error_code": "TIMEOUT"},
    {"stop_reason": "error", "error": "boom", "error_code": None},
    {"stop_reason": "error", "error": "TIMEOUT: late", "error_code": "AGENT_CAP"},
    {"stop_reason": "cancelled", "error": "user", "error_code": "TIMEOUT"},
    {"stop_reason": "error", "error": "boom", "error_code": "NOT_A_CODE"},
])
def test_a_code_that_breaks_the_rules_is_refused(fields: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        WorkflowResult(**fields)


_CODES = st.sampled_from([None, *Code])
_HEADS = st.one_of(st.sampled_from([f"{c.value}:" for c in Code]),
                   st.sampled_from(["", "Error:", "TIMEOUT", "NOT_A_CODE:", " TIMEOUT:"]))


@given(stop_reason=st.sampled_from(["completed", "cancelled", "error"]),
       head=st.one_of(st.none(), _HEADS), tail=st.text(max_size=20), code=_CODES)
def test_the_validator_accepts_exactly_the_consistent_results(
        stop_reason: str, head: str | None, tail: str, code: Code | None) -> None:
    error = None if head is None else head + tail
    named = None if error is None else code_in_text(error)
    consistent = ((stop_reason == "completed") == (error is None) == (code is None)
                  and (stop_reason != "cancelled" or code == Code.CANCELLED)
                  and (named is None or named == code))
    try:
        result = WorkflowResult(stop_reason=stop_reason, error=error, error_code=code)
    except ValidationError:
        assert not consistent
    else:
        assert consistent
        assert WorkflowResult.model_validate(result.model_dump(mode="json")) == result


@given(stop_reason=st.sampled_from(["cancelled", "error"]), head=_HEADS, tail=st.text(max_size=20))
def test_a_derived_code_always_makes_a_valid_result(stop_reason: str, head: str,
                                                    tail: str) -> None:
    error = head + tail
    named = code_in_text(error)
    if stop_reason == "cancelled" and named not in (None, Code.CANCELLED):
        return  # a cancel whose text names another code is no result anyone builds
    result = WorkflowResult(stop_reason=stop_reason, error=error)
    assert result.error_code is not None
    assert result.error_code == (named or (Code.CANCELLED if stop_reason == "cancelled"
                                           else SCRIPT_FAILED))


# ---- the store ----------------------------------------------------------------------------------

@pytest.mark.parametrize("factory", ENGINES)
async def test_the_stored_result_keeps_its_code(factory: Any, tmp_path: Path) -> None:
    db = str(tmp_path / "runs.sqlite3")
    async with SQLiteRunStore(db) as store:
        engine_type = QuickJSEngine if factory is quickjs_factory else None
        if engine_type is None:
            from dsh_workflow import SubprocessEngine
            engine: Any = SubprocessEngine(CONFIG, provider=_Provider(), store=store,
                                           pool_size=1)
        else:
            engine = QuickJSEngine(CONFIG, provider=_Provider(), store=store)
        async with engine:
            runs = {name: engine.start(WorkflowStartRequest(meta=META, script=script))
                    for name, script in [("capped", "return await agent(42)"),
                                         ("thrown", "throw new Error('own')"),
                                         ("done", "return 1")]}
            results = {name: await run.result() for name, run in runs.items()}
            for run in runs.values():
                await run.dispose()
        for name, run in runs.items():
            record = await store.get_run(run.id)
            assert record is not None and record.result is not None
            loaded = WorkflowResult.model_validate(record.result)
            assert loaded == results[name], name
    assert results["capped"].error_code == Code.INVALID_ARGUMENT
    assert results["thrown"].error_code == SCRIPT_FAILED
    assert results["done"].error_code is None


async def test_a_row_stored_before_the_field_gets_its_code_on_load(tmp_path: Path) -> None:
    db = str(tmp_path / "runs.sqlite3")
    old: dict[str, dict[str, Any]] = {
        "cap": {"value": None, "stop_reason": "error", "error": "AGENT_CAP: too many",
                "agents_started": 1},
        "bye": {"value": None, "stop_reason": "cancelled", "error": "workflow run cancelled: x"},
        "own": {"value": None, "stop_reason": "error", "error": "Error: mine"},
        "ok": {"value": 3, "stop_reason": "completed", "error": None}}
    async with SQLiteRunStore(db) as store:
        for run_id, result in old.items():
            await store.create_run(run_id, meta=META, script="s")
            await store.finish_run(run_id, status=result["stop_reason"], result=result)
    with sqlite3.connect(db) as conn:  # what an older version wrote: no error_code key
        stored = dict(conn.execute("SELECT id, result FROM runs").fetchall())
    assert all("error_code" not in text for text in stored.values())
    async with SQLiteRunStore(db) as store:
        loaded = {run_id: (await store.get_run(run_id)) for run_id in old}
    codes = {run_id: record.result.get("error_code") if record and record.result else "?"
             for run_id, record in loaded.items()}
    assert codes == {"cap": "AGENT_CAP", "bye": "CANCELLED", "own": SCRIPT_FAILED.value,
                     "ok": None}
    for record in loaded.values():
        assert record is not None and record.result is not None
        WorkflowResult.model_validate(record.result)


def test_stored_code_prefers_the_stored_field() -> None:
    assert stored_code({"stop_reason": "error", "error": "boom",
                        "error_code": "AGENT_FAILED"}) == ENGINE_FAILED
    assert stored_code({"stop_reason": "error", "error": "TIMEOUT: x"}) == Code.TIMEOUT
    assert stored_code({"stop_reason": "completed", "error": None}) is None
    plain = {"value": 1}
    assert with_error_code(plain) is plain


def test_a_script_error_stored_by_an_older_release_reads_as_script_error() -> None:
    """Before SCRIPT_ERROR, the script's own error was stored as RESULT_UNSERIALIZABLE with an
    unprefixed text; a value JSON cannot hold kept its prefix, and keeps its code."""
    old = {"stop_reason": "error", "error": "Error: mine", "error_code": "RESULT_UNSERIALIZABLE"}
    assert SCRIPT_FAILED == Code.SCRIPT_ERROR
    assert stored_code(old) == Code.SCRIPT_ERROR
    assert with_error_code(old)["error_code"] == "SCRIPT_ERROR"
    WorkflowResult.model_validate(with_error_code(old))
    bigint = {"stop_reason": "error", "error": "RESULT_UNSERIALIZABLE: return value: a BigInt",
              "error_code": "RESULT_UNSERIALIZABLE"}
    assert stored_code(bigint) == Code.RESULT_UNSERIALIZABLE
    assert with_error_code(bigint) is bigint


# ---- consumers ----------------------------------------------------------------------------------

async def test_the_tool_data_and_the_background_status_carry_the_code() -> None:
    async with QuickJSEngine(CONFIG, provider=_Provider()) as engine:
        tool = WorkflowTool(engine)
        failed = await tool.execute({"meta": META, "script": "return await agent(42)"})
        own = await tool.execute({"meta": META, "script": "throw new Error('mine')"})
        done = await tool.execute({"meta": META, "script": "return 1"})
        assert failed.data is not None and failed.data["error_code"] == "INVALID_ARGUMENT"
        assert own.data is not None and own.data["error_code"] == SCRIPT_FAILED.value
        assert done.data is not None and "error_code" not in done.data
        async with WorkflowTool(engine, background=True) as background:
            started = await background.execute({"meta": META, "script": "return await agent(1)"})
            assert started.data is not None
            run_id = started.data["run_id"]
            assert background.status(run_id).data["error_code"] is None  # type: ignore[index]  # a background status has data
            completion = await anext(aiter(background.completions()))
            assert completion.data is not None
            assert completion.data["error_code"] == "INVALID_ARGUMENT"
            status = background.status(run_id).data
            assert status is not None and status["error_code"] == "INVALID_ARGUMENT"


@pytest.mark.parametrize(("result", "expected"), [
    ({"stop_reason": "cancelled", "error": "workflow run cancelled: x", "error_code": "CANCELLED"},
     ("CANCELLED", "workflow run cancelled: x")),
    ({"stop_reason": "error", "error": "the sandbox process ended without a result",
      "error_code": ENGINE_FAILED.value},
     (ENGINE_FAILED.value, "the sandbox process ended without a result")),
    ({"stop_reason": "error", "error": "Error: mine", "error_code": SCRIPT_FAILED.value},
     ("SCRIPT_ERROR", "Error: mine")),
    ({"stop_reason": "error", "error": "Error: old", "error_code": "RESULT_UNSERIALIZABLE"},
     ("SCRIPT_ERROR", "Error: old")),
    ({"stop_reason": "error", "error": "RESULT_UNSERIALIZABLE: f",
      "error_code": "RESULT_UNSERIALIZABLE"},
     ("RESULT_UNSERIALIZABLE", "f")),
    ({"stop_reason": "cancelled", "error": "workflow run cancelled: y"},
     ("CANCELLED", "workflow run cancelled: y")),
])
def test_the_viewer_shows_the_code_it_is_given(result: dict[str, Any],
                                               expected: tuple[str | None, str]) -> None:
    record = RunRecord(id="r", meta={}, script="", created_at=0.0, status="error",
                       result=result)
    view = error_view(record)
    assert view is not None and (view.code, view.message) == expected

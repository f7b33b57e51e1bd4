"""The run store survives what it is handed and what it finds (docs/durable-runs.md): token counts
past SQLite's integer range, and rows that are corrupt or written by something else. Real SQLite
files; corrupt rows are written with ``sqlite3`` straight into the file."""

from __future__ import annotations

import os
import sqlite3
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from _broken_store import BROKEN_EVENTS, BROKEN_JOURNAL, CORRUPTIONS, GOOD, SCRIPT, make_store
from _support import ENGINE_SKIPS, subprocess_factory

from dsh_workflow import (
    EngineConfig,
    JournalEntry,
    QuickJSEngine,
    RunStoreError,
    SQLiteRunStore,
    SubagentRequest,
    SubagentResult,
    Usage,
    WorkflowError,
    WorkflowErrorCode,
    WorkflowStartRequest,
)
from dsh_workflow.testing import FunctionProvider

pytestmark = pytest.mark.anyio

META = {"name": "robust", "description": "a robust store"}
HUGE = 2**70
SQLITE_MAX = 2**63 - 1


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


async def run_script(make_engine: Any, path: Path, script: str, provider: Any, *,
                     resume_from: str | None = None, config: EngineConfig | None = None
                     ) -> tuple[str, Any]:
    async with SQLiteRunStore(path) as store, \
            make_engine(config or EngineConfig(), provider, store) as engine:
        run = engine.start(WorkflowStartRequest(meta=META, script=script,
                                                resume_from=resume_from))
        with anyio.fail_after(30):
            result = await run.result()
        await run.dispose()
    return run.id, result


# ---- token counts past SQLite's integer range -----------------------------------------------

async def test_a_child_reporting_2_to_the_70_tokens_fails_and_the_run_is_stored(
        make_engine: Any, tmp_path: Path) -> None:
    """Usage past the per-child bounds (SPEC §24) fails that child with its reason; nothing
    of it is counted, and the run completes and is stored."""
    def huge(request: SubagentRequest) -> SubagentResult:
        return SubagentResult(text="big", usage=Usage(input_tokens=HUGE, output_tokens=HUGE))

    path = tmp_path / "runs.sqlite3"
    run_id, result = await run_script(make_engine, path,
                                      "return [await agent('count'), 'after']",
                                      FunctionProvider(huge))
    assert result.stop_reason == "completed", result.error
    assert result.value == [None, "after"] and result.agents_failed == 1
    assert result.usage.input_tokens == 0  # nothing of it is counted
    async with SQLiteRunStore(path) as store:
        record = await store.get_run(run_id)
        assert record is not None and record.status == "completed"
        assert record.result is not None and record.result["value"] == [None, "after"]
        assert await store.journal(run_id) == []  # a failed child is not journaled
        ended = [e.data for e in await store.events(run_id) if e.data.get("event") == "AgentEnded"]
        assert "input_tokens" in ended[0]["error"]["message"]


async def test_the_store_clamps_counts_it_is_given(tmp_path: Path) -> None:
    async with SQLiteRunStore(tmp_path / "runs.sqlite3") as store:
        await store.create_run("r", meta=META, script="")
        record = await store.finish_run("r", status="completed", result={},
                                        usage=Usage(input_tokens=HUGE, output_tokens=3))
        assert record.usage == Usage(input_tokens=SQLITE_MAX, output_tokens=3)
    with sqlite3.connect(tmp_path / "runs.sqlite3") as conn:
        assert conn.execute("SELECT input_tokens FROM runs").fetchone() == (SQLITE_MAX,)



# ---- broken rows ------------------------------------------------------------------------------

@pytest.fixture
async def broken_store(tmp_path: Path) -> Path:
    path = tmp_path / "runs.sqlite3"
    await make_store(path)
    return path


async def test_a_listing_marks_broken_runs_and_keeps_the_rest(broken_store: Path) -> None:
    async with SQLiteRunStore(broken_store) as store:
        records = {r.id: r for r in await store.list_runs()}
        assert set(records) == {*GOOD, *CORRUPTIONS, BROKEN_EVENTS, BROKEN_JOURNAL}
        for run_id in (*GOOD, BROKEN_EVENTS, BROKEN_JOURNAL):
            assert records[run_id].status == "completed" and records[run_id].problem is None
        for run_id in CORRUPTIONS:
            record = records[run_id]
            assert record.status == "broken", run_id
            assert record.problem, run_id
        assert "meta" in (records["bad-meta"].problem or "")
        assert "result" in (records["bad-result"].problem or "")
        assert "status" in (records["bad-status"].problem or "")
        assert records["bad-result"].meta == {"name": "name of bad-result"}  # what could be read
        assert {r.id for r in await store.list_runs(status="broken")} == set(CORRUPTIONS)
        assert {r.id for r in await store.list_runs(status="completed")} == \
            {*GOOD, BROKEN_EVENTS, BROKEN_JOURNAL}
        assert len(await store.list_runs(limit=3)) == 3


async def test_reads_of_a_broken_run_raise_run_store_error_naming_it(broken_store: Path) -> None:
    async with SQLiteRunStore(broken_store) as store:
        for run_id in CORRUPTIONS:
            with pytest.raises(RunStoreError, match=f"run '{run_id}' is broken"):
                await store.get_run(run_id)
            with pytest.raises(RunStoreError, match=f"run '{run_id}' is broken"):
                store.get_run_sync(run_id)
        with pytest.raises(RunStoreError, match=f"run '{BROKEN_EVENTS}' is broken: .*events"):
            await store.events(BROKEN_EVENTS)
        with pytest.raises(RunStoreError, match=f"run '{BROKEN_JOURNAL}' has a broken journal"):
            await store.journal(BROKEN_JOURNAL)
        # the rest reads as before
        record = await store.get_run("good-1")
        assert record is not None and record.result is not None
        assert record.result["value"] == 0
        assert [e.data["event"] for e in await store.events("good-1")] == \
            ["WorkflowStarted", "LogEmitted"]
        assert [e.text for e in await store.journal("good-1")] == ["hello back"]


@pytest.mark.parametrize("damage", [
    "UPDATE events SET data = '{\"a\": 1}'",  # not an array
    "UPDATE events SET data = '[[1.0, 5]]'",  # an event that is not an object
    "UPDATE events SET data = '[[\"when\", {}]]'",  # a time that is not a number
    "UPDATE events SET first_seq = 'one'",
    "UPDATE events SET data = x'80'",
])
async def test_every_kind_of_broken_event_row_is_a_run_store_error(
        tmp_path: Path, damage: str) -> None:
    path = tmp_path / "runs.sqlite3"
    async with SQLiteRunStore(path) as store:
        await store.create_run("r", meta=META, script="")
        await store.append_events("r", [{"event": "X"}])
    with sqlite3.connect(path) as conn:
        conn.execute(damage)
    async with SQLiteRunStore(path) as store:
        with pytest.raises(RunStoreError, match="run 'r'"):
            await store.events("r")


@pytest.mark.parametrize("damage", [
    "UPDATE journal SET structured = '[1,'",
    "UPDATE journal SET key = ''",  # an agent entry without its key
    "UPDATE journal SET input_tokens = -3, output_tokens = 1",
    "UPDATE journal SET kind = 'weather'",
    "UPDATE journal SET seq = 'first'",
    "UPDATE journal SET text = x'ff'",
])
async def test_every_kind_of_broken_journal_row_is_a_run_store_error(
        tmp_path: Path, damage: str) -> None:
    path = tmp_path / "runs.sqlite3"
    async with SQLiteRunStore(path) as store:
        await store.create_run("r", meta=META, script="")
        await store.commit_journal([JournalEntry(run_id="r", seq=1, key="k", text="t",
                                                 usage=Usage(input_tokens=1))])
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA ignore_check_constraints = ON")
        conn.execute(damage)
    async with SQLiteRunStore(path) as store:
        with pytest.raises(RunStoreError, match="run 'r' has a broken journal"):
            await store.journal("r")


async def test_resuming_over_a_broken_journal_fails_with_the_store_error(
        make_engine: Any, broken_store: Path) -> None:
    calls: list[str] = []

    def answer(request: SubagentRequest) -> str:
        calls.append(request.prompt)
        return "live"

    _, result = await run_script(make_engine, broken_store, SCRIPT, FunctionProvider(answer),
                                 resume_from=BROKEN_JOURNAL)
    assert result.stop_reason == "error"
    assert "run store" in (result.error or "") and "broken journal" in (result.error or "")
    assert "engine failed" not in (result.error or "")
    assert calls == []


async def test_resuming_a_broken_run_is_refused_at_start(make_engine: Any,
                                                         broken_store: Path) -> None:
    async with SQLiteRunStore(broken_store) as store, \
            make_engine(EngineConfig(), FunctionProvider(), store) as engine:
        with pytest.raises(WorkflowError, match=r"bad-meta.*is broken") as caught:
            engine.start(WorkflowStartRequest(meta=META, script=SCRIPT, resume_from="bad-meta"))
        assert caught.value.code == WorkflowErrorCode.INVALID_ARGUMENT


async def test_reads_past_sqlite_integer_range_answer_instead_of_raising(tmp_path: Path) -> None:
    async with SQLiteRunStore(tmp_path / "runs.sqlite3") as store:
        await store.create_run("r", meta=META, script="")
        await store.append_events("r", [{"event": "A"}, {"event": "B"}])
        assert await store.events("r", after=2**64) == []
        assert [e.seq for e in await store.events("r", after=-(2**70))] == [1, 2]
        assert [r.id for r in await store.list_runs(limit=2**80)] == ["r"]


@pytest.mark.parametrize("damage", [
    "UPDATE calls SET request = '{\"prompt\": '",
    "UPDATE calls SET structured = '[1,'",
    "UPDATE calls SET usage = '{\"input_tokens\": -4}'",
    "UPDATE calls SET started_at = 'noon'",
])
async def test_a_broken_call_record_is_a_run_store_error_naming_the_run(
        tmp_path: Path, damage: str) -> None:
    path = tmp_path / "runs.sqlite3"
    run_id, result = await run_script(_quickjs, path, "return await agent('hi')",
                                      FunctionProvider())
    assert result.stop_reason == "completed", result.error
    async with SQLiteRunStore(path) as store:
        assert [call.seq for call in await store.calls(run_id)] == [1]
    with sqlite3.connect(path) as conn:
        assert conn.execute(damage).rowcount == 1
    async with SQLiteRunStore(path) as store:
        with pytest.raises(RunStoreError, match=f"run '{run_id}' has a broken call record"):
            await store.calls(run_id)
        with pytest.raises(RunStoreError, match=f"run '{run_id}' has a broken call record"):
            await store.call(run_id, 1)
        assert await store.calls(run_id, after=2**70) == []
    done = await anyio.run_process(
        [sys.executable, "-m", "dsh_workflow", "show", run_id, "--agent", "1", "--store",
         str(path)], check=False,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])})
    stderr = done.stderr.decode()
    assert done.returncode == 2 and "Traceback" not in stderr, stderr
    assert f"run '{run_id}' has a broken call record" in stderr

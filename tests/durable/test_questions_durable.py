"""Questions in durable runs (docs/durable-runs.md, "Runs that wait"): a parked run is stored
``waiting`` with its open questions; an answer written to the store (another process, the
viewer, ``dsh-workflow answer``) reaches a running run within half a second, or a parked run
when it is continued; a continuation replays the journal (answered questions included, no
paid call twice) and keeps each question's qid and absolute deadline.

Both engines and both async backends, against a real SQLite file.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from _support import ENGINE_SKIPS, await_until, subprocess_factory

from dsh_workflow import (
    AgentReplayed,
    AgentStarted,
    EngineConfig,
    QuestionAnswered,
    QuestionAsked,
    QuickJSEngine,
    SQLiteRunStore,
    SubagentRequest,
    WorkflowError,
    WorkflowEvent,
    WorkflowStartRequest,
)
from dsh_workflow.testing import AutoAnswer, FunctionProvider, check_run_events

pytestmark = pytest.mark.anyio

META = {"name": "approve", "description": "asks before it spends"}

SCRIPT = """
const draft = await agent("draft the plan");
const ok = await checkpoint("Ship " + draft + "?", {details: "goes live"});
const who = await ask("Who signs?", {choices: ["ana", "bo"]});
const last = await agent("sign as " + who);
return {draft, ok, who, last};"""


def _factory(name: str) -> Any:
    if name == "quickjs":
        return lambda provider, store, **kw: QuickJSEngine(EngineConfig(), provider=provider,
                                                           store=store, **kw)
    if subprocess_factory(pool_size=1) is None:
        return None
    from dsh_workflow import SubprocessEngine

    return lambda provider, store, **kw: SubprocessEngine(EngineConfig(), provider=provider,
                                                          store=store, pool_size=1, **kw)


ENGINES = {"quickjs": _factory("quickjs"), "subprocess": _factory("subprocess")}


@pytest.fixture(params=sorted(ENGINES))
def make_engine(request: pytest.FixtureRequest) -> Any:
    factory = ENGINES[request.param]
    if factory is None:
        pytest.skip(ENGINE_SKIPS.get(request.param, "engine unavailable"))
    return factory


class Paid:
    """A provider that counts what it was paid for."""

    def __init__(self) -> None:
        self.prompts: list[str] = []
        self.provider = FunctionProvider(self._answer)

    def _answer(self, request: SubagentRequest) -> str:
        self.prompts.append(request.prompt)
        return request.prompt.upper()


async def test_a_parked_run_is_answered_in_the_store_and_continued_by_a_resume(
        make_engine: Any, tmp_path: Path) -> None:
    paid = Paid()
    events: list[WorkflowEvent] = []
    path = tmp_path / "runs.sqlite3"
    async with SQLiteRunStore(path) as store:
        async with make_engine(paid.provider, store, park=True) as engine:
            engine.events.subscribe(events.append)
            first = engine.start(WorkflowStartRequest(meta=META, script=SCRIPT))
            parked = await first.result()
            await first.dispose()
        assert parked.stop_reason == "waiting" and parked.waiting_reason == "question"
        assert [(q.qid, q.kind) for q in parked.pending] == [("q1", "checkpoint")]
        record = await store.get_run(first.id)
        assert record is not None and record.status == "waiting"
        assert record.result is not None and record.result["waiting_reason"] == "question"
        assert [q.qid for q in await store.questions(first.id)] == ["q1"]
        check_run_events(events, first.id)

        with pytest.raises(WorkflowError):
            await store.answer_question(first.id, "q1", "yes", by="command")
        with pytest.raises(WorkflowError):
            await store.answer_question(first.id, "q7", True, by="command")
        await store.answer_question(first.id, "q1", True, by="command")
        with pytest.raises(WorkflowError):  # answered once
            await store.answer_question(first.id, "q1", False, by="command")
        assert await store.questions(first.id) == []

        async with make_engine(paid.provider, store, park=True) as engine:
            engine.events.subscribe(events.append)
            second = engine.start(WorkflowStartRequest(meta=META, script=SCRIPT,
                                                       resume_from=first.id))
            again = await second.result()
            await second.dispose()
        assert again.stop_reason == "waiting"
        assert [(q.qid, q.question) for q in again.pending] == [("q2", "Who signs?")]
        assert again.agents_replayed == 1 and again.agents_started == 0
        # the replayed answer is no new question: only the open one was asked
        assert [e.qid for e in events if isinstance(e, QuestionAsked) and e.run.id == second.id
                ] == ["q2"]

        await store.answer_question(second.id, "q2", "bo", by="command")
        async with make_engine(paid.provider, store, park=True) as engine:
            engine.events.subscribe(events.append)
            third = engine.start(WorkflowStartRequest(meta=META, script=SCRIPT,
                                                      resume_from=second.id))
            done = await third.result()
            await third.dispose()
        assert done.stop_reason == "completed"
        assert done.value == {"draft": "DRAFT THE PLAN", "ok": True, "who": "bo",
                              "last": "SIGN AS BO"}
        record = await store.get_run(third.id)
        assert record is not None and record.status == "completed"
        # every question of the chain is in the last run's record, answered
        records = await store.question_records(third.id)
        assert [(r.question.qid, r.answer, r.by) for r in records] == [
            ("q1", True, "command"), ("q2", "bo", "command")]
    assert paid.prompts == ["draft the plan", "sign as bo"]  # no paid call ran twice
    assert not [e for e in events if isinstance(e, AgentStarted) and e.run.id == second.id]
    assert [e.seq for e in events if isinstance(e, AgentReplayed) and e.run.id == third.id] == [1]


async def test_a_waiting_run_takes_an_answer_another_process_wrote_within_half_a_second(
        make_engine: Any, tmp_path: Path) -> None:
    events: list[WorkflowEvent] = []
    async with SQLiteRunStore(tmp_path / "runs.sqlite3") as store, \
            make_engine(Paid().provider, store) as engine:
        engine.events.subscribe(events.append)
        run = engine.start(WorkflowStartRequest(meta=META, script="""
            return await ask("Budget?", {schema: {type: "object",
                properties: {usd: {type: "number"}}, required: ["usd"]}});"""))
        await await_until(run.pending, what="the run's question to be open", timeout=20)
        # another process: a second store object on the same file
        async with SQLiteRunStore(tmp_path / "runs.sqlite3") as other:
            assert [q.qid for q in await other.questions(run.id)] == ["q1"]
            with pytest.raises(WorkflowError):
                await other.answer_question(run.id, "q1", {"usd": "ten"}, by="viewer")
            began = time.monotonic()
            await other.answer_question(run.id, "q1", {"usd": 10}, by="viewer")
        result = await run.result()
        took = time.monotonic() - began
        await run.dispose()
    assert result.value == {"usd": 10}
    assert took < 0.5 + 1.0  # the poll's half second, with room for a loaded machine
    assert [(e.qid, e.by) for e in events if isinstance(e, QuestionAnswered)] == [("q1", "viewer")]
    with pytest.raises(WorkflowError):  # the caller came too late: it was answered
        run.answer("q1", {"usd": 1})


async def test_a_deadline_is_absolute_and_a_continuation_after_it_applies_on_timeout(
        make_engine: Any, tmp_path: Path) -> None:
    async with SQLiteRunStore(tmp_path / "runs.sqlite3") as store:
        async with make_engine(Paid().provider, store, park=True) as engine:
            first = engine.start(WorkflowStartRequest(meta=META, script="""
                return await ask("Colour?", {timeout: "2s", default: "grey"});"""))
            parked = await first.result()
            await first.dispose()
        assert parked.stop_reason == "waiting"
        (question,) = parked.pending
        assert question.deadline is not None and question.deadline.tzinfo is not None
        stored = (await store.questions(first.id))[0]
        assert stored.deadline == question.deadline
        await anyio.sleep(max(0.0, question.deadline.timestamp() - time.time()) + 0.1)
        async with make_engine(Paid().provider, store, park=True) as engine:
            second = engine.start(WorkflowStartRequest(meta=META, script="""
                return await ask("Colour?", {timeout: "2s", default: "grey"});""",
                                                       resume_from=first.id))
            done = await second.result()
            await second.dispose()
    assert done.stop_reason == "completed" and done.value == "grey"


def test_a_version_4_store_is_upgraded_keeping_its_runs_and_may_hold_waiting_runs(
        tmp_path: Path) -> None:
    import sqlite3

    from dsh_workflow._store.connection import connect
    from dsh_workflow._store.migrations import MIGRATIONS, migrate

    path = str(tmp_path / "v4.sqlite3")
    conn = connect(path, synchronous="NORMAL", busy_timeout_s=1)
    try:
        migrate(conn, path, MIGRATIONS[:4])
        conn.execute("INSERT INTO runs (id, meta, script, created_at, status) "
                     "VALUES ('old', '{}', 's', 1.0, 'completed')")
        with pytest.raises(sqlite3.IntegrityError):  # version 4 knows no waiting run
            conn.execute("INSERT INTO runs (id, meta, script, created_at, status) "
                         "VALUES ('w', '{}', 's', 1.0, 'waiting')")
        assert migrate(conn, path) == 4
        conn.execute("INSERT INTO runs (id, meta, script, created_at, status) "
                     "VALUES ('w', '{}', 's', 1.0, 'waiting')")
        with pytest.raises(sqlite3.IntegrityError):  # the check still holds otherwise
            conn.execute("INSERT INTO runs (id, meta, script, created_at, status) "
                         "VALUES ('x', '{}', 's', 1.0, 'paused')")
        assert conn.execute("SELECT id, status FROM runs ORDER BY id").fetchall() == [
            ("old", "completed"), ("w", "waiting")]
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        assert conn.execute("SELECT count(*) FROM questions").fetchone() == (0,)
    finally:
        conn.close()


async def test_the_nth_ask_of_a_question_takes_the_nth_answer(make_engine: Any,
                                                              tmp_path: Path) -> None:
    script = """
        const seen = [];
        for (let i = 0; i < 3; i++) seen.push(await ask("Next word?", {label: "word " + i}));
        return seen;"""
    async with SQLiteRunStore(tmp_path / "runs.sqlite3") as store:
        async with make_engine(Paid().provider, store) as engine:
            first = engine.start(WorkflowStartRequest(meta=META, script=script))
            for word in ("alpha", "beta"):
                await await_until(first.pending, what=f"the question before {word!r}",
                                  timeout=20)
                await first.answer(first.pending()[0].qid, word)
            await await_until(first.pending, what="the third question to be open", timeout=20)
            first.cancel()  # stopped while the third ask is open
            await first.result()
            await first.dispose()
        async with make_engine(Paid().provider, store, park=True) as engine:
            second = engine.start(WorkflowStartRequest(meta=META, script=script,
                                                       resume_from=first.id))
            parked = await second.result()
            await second.dispose()
        assert [(q.qid, q.label) for q in parked.pending] == [("q3", "word 2")]
        await store.answer_question(second.id, "q3", "gamma", by="command")
        async with make_engine(Paid().provider, store, park=True) as engine:
            third = engine.start(WorkflowStartRequest(meta=META, script=script,
                                                      resume_from=second.id))
            done = await third.result()
            await third.dispose()
    assert done.value == ["alpha", "beta", "gamma"]


async def test_identical_questions_asked_at_once_replay_in_call_order(
        make_engine: Any, tmp_path: Path) -> None:
    script = """
        const schema = {type: "object", properties: {v: {type: "integer"}}, required: ["v"]};
        const both = await Promise.all([ask("Pick?", {schema}), ask("Pick?", {schema}),
                                        ask("Pick?", {schema})]);
        const last = await checkpoint("Done?");
        return {both, last};"""
    async with SQLiteRunStore(tmp_path / "runs.sqlite3") as store:
        async with make_engine(Paid().provider, store) as engine:
            first = engine.start(WorkflowStartRequest(meta=META, script=script))
            await await_until(lambda: len(first.pending()) >= 3,
                              what="the three questions to be open", timeout=20)
            for question, value in zip(first.pending(), (1, 2, 3), strict=True):
                await first.answer(question.qid, {"v": value})
            await await_until(first.pending, what="the checkpoint to be open", timeout=20)
            first.cancel()
            await first.result()
            await first.dispose()
        async with make_engine(Paid().provider, store, answers=AutoAnswer({"Done?": True})
                               ) as engine:
            second = engine.start(WorkflowStartRequest(meta=META, script=script,
                                                       resume_from=first.id))
            done = await second.result()
            await second.dispose()
    assert done.value == {"both": [{"v": 1}, {"v": 2}, {"v": 3}], "last": True}

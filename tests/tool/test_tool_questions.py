"""The ``workflow`` tool and runs that wait (docs/embedding.md, "Runs that wait"): a parked run's
text names the run id, each question's ``qid: <qid>`` and the ``workflow_answer`` companion;
``workflow_answer`` records an answer (refusing an invalid one, the question staying open) and
continues the parked run once all are answered, returning its result — over a real SQLite store
on both backends; the companion is exported by ``openai_tools()``/``anthropic_tools()`` over a
durable engine only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsh_workflow import EchoProvider, EngineConfig, QuickJSEngine, SQLiteRunStore, WorkflowTool
from dsh_workflow._tool import texts

pytestmark = pytest.mark.anyio

META = {"name": "asking-tool", "description": "asks through the tool"}
SCRIPT = """
const first = await agent("alpha");
const ship = await checkpoint("Ship it?");
const colour = await ask("Which colour?", {choices: ["red", "green"]});
return {first, ship, colour};
"""


async def test_a_parked_run_is_answered_and_continued_through_the_tool(tmp_path: Path) -> None:
    async with SQLiteRunStore(tmp_path / "runs.sqlite3") as store, QuickJSEngine(
            EngineConfig(), provider=EchoProvider(), store=store, park=True) as engine:
        tool = WorkflowTool(engine)
        parked = await tool.execute({"meta": META, "script": SCRIPT})
        assert not parked.is_error, parked.text
        assert parked.data is not None and parked.data["stop_reason"] == "waiting"
        run_id = parked.data["run_id"]
        assert f"(run {run_id})" in parked.text and f"Run id: {run_id}" in parked.text
        assert "- qid: q1 (checkpoint: true approves, false rejects): Ship it?" in parked.text
        assert 'workflow_answer({"runId": "' + run_id in parked.text
        assert [q["qid"] for q in parked.data["pending"]] == ["q1"]

        refused = await tool.call("workflow_answer", {"runId": run_id, "qid": "q1",
                                                      "value": "yes"})
        assert refused.is_error and "true (approve) or false (reject)" in refused.text
        assert [q.qid for q in await store.questions(run_id)] == ["q1"]  # still open
        assert (await tool.call("workflow_answer", {"runId": run_id, "qid": "q1"})).is_error

        # the continued run asks its next question and parks again
        again = await tool.call("workflow_answer", {"runId": run_id, "qid": "q1",
                                                    "value": True})
        assert not again.is_error, again.text
        assert again.data is not None and again.data["stop_reason"] == "waiting"
        second = again.data["run_id"]
        assert second != run_id
        assert '- qid: q2 (one of ["red", "green"]): Which colour?' in again.text

        done = await tool.call("workflow_answer", {"runId": second, "qid": "q2",
                                                   "value": "green"})
        assert not done.is_error, done.text
        assert done.text.startswith('workflow "asking-tool" completed (0 agents).')
        assert done.data is not None and done.data["agents_replayed"] == 1  # replayed: nothing paid twice
        assert json.loads(done.text.split("Return value:\n", 1)[1].split("\nRun id:")[0]) == {
            "first": "echo: alpha", "ship": True, "colour": "green"}
        answered = await store.question_records(run_id)
        assert [(r.question.qid, r.by) for r in answered] == [("q1", "caller")]

        late = await tool.call("workflow_answer", {"runId": run_id, "qid": "q1",
                                                   "value": False})
        assert late.is_error and "already answered" in late.text


async def test_the_answer_companion_is_exported_over_a_durable_engine_only(
        tmp_path: Path) -> None:
    async with SQLiteRunStore(tmp_path / "runs.sqlite3") as store, QuickJSEngine(
            EngineConfig(), provider=EchoProvider(), store=store) as durable:
        tool = WorkflowTool(durable, tool_name="flow")
        names = [t["function"]["name"] for t in tool.openai_tools()]
        assert names == ["flow", "flow_result", "flow_answer"]
        assert [t["name"] for t in tool.anthropic_tools()] == names
        assert tool.answer_tool() == ("flow_answer", texts.ANSWER_DESCRIPTION,
                                      texts.answer_schema())
        assert tool.result_tool()[0] == "flow_result"
    async with QuickJSEngine(EngineConfig(), provider=EchoProvider(), park=True) as plain:
        tool = WorkflowTool(plain)
        assert [t["name"] for t in tool.anthropic_tools()] == ["workflow", "workflow_result"]
        assert tool.answer_tool() is None
        parked = await tool.execute({"meta": META, "script": SCRIPT})
        assert "- qid: q1" in parked.text and "cannot be continued" in parked.text
        with pytest.raises(ValueError):
            await tool.call("workflow_answer", {"runId": "x", "qid": "q1", "value": True})


async def test_the_description_names_ask_and_checkpoint() -> None:
    description = WorkflowTool(QuickJSEngine(provider=EchoProvider())).description
    assert texts.QUESTIONS in description
    assert "ask(question, {choices?, multiple?, schema?" in description
    assert "checkpoint(title" in description

"""The model learns what failed (SPEC §17): a completed run's tool text ends with the
``Agents failed:`` line when any child failed, and ``data`` lists the failures; otherwise the
text and data are as before. On both engines, a real provider double."""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from _support import TIGHT_CONFIG, await_until, both_engines

from dsh_workflow import SubagentRequest, SubagentResult, ToolResult, WorkflowTool
from dsh_workflow._tool.failures import failures_line

pytestmark = pytest.mark.anyio
ENGINES = both_engines()
INVOICE = {"type": "object", "required": ["number"],
           "properties": {"number": {"type": "string", "pattern": r"^INV-\d{4}$"}}}


class _Provider:
    async def run(self, request: SubagentRequest) -> SubagentResult:
        if request.prompt.startswith("bad"):
            return SubagentResult(text="{}", structured={"number": "INV-" + request.prompt[3:]})
        if request.prompt == "hang":
            await anyio.sleep_forever()
        if request.schema is not None:
            return SubagentResult(text="{}", structured={"number": "INV-1234"})
        return SubagentResult(text="ok")


def _call(script: str) -> dict[str, Any]:
    return {"meta": {"name": "invoices", "description": "extract invoices"}, "script": script,
            "args": {"schema": INVOICE}}


@pytest.mark.parametrize("factory", ENGINES)
async def test_the_text_ends_with_the_failures_and_data_lists_them(factory: Any) -> None:
    config = TIGHT_CONFIG.model_copy(update={"agent_timeout_s": 0.5})
    script = """
      const s = {schema: args.schema};
      return await parallel([
        () => agent('bad12', s), () => agent('bad7', {...s, label: 'invoice 2'}),
        () => agent('hang'), () => agent('good', s), () => agent('x'),
      ]);
    """
    async with factory(config, _Provider()) as engine:
        result = await WorkflowTool(engine).execute(_call(script))
    assert not result.is_error
    lines = result.text.split("\n")
    assert lines[0] == 'workflow "invoices" completed (5 agents).'
    assert lines[-1] == ("Agents failed: 3 of 5 — 2 invalid (/number: does not match "
                         "'^INV-\\d{4}$'), 1 timeout.")
    assert json.loads("\n".join(lines[2:-1])) == [None, None, None, {"number": "INV-1234"}, "ok"]
    data = result.data or {}
    assert data["agents_failed"] == 3
    failures = sorted(data["failures"], key=lambda f: f["seq"])
    assert [(f["seq"], f["label"], f["outcome"], f["kind"]) for f in failures] == [
        (1, "bad12", "failed", "invalid"), (2, "invoice 2", "failed", "invalid"),
        (3, "hang", "timeout", "timeout")]
    assert failures[1]["details"] == ["/number: 'INV-7' does not match '^INV-\\d{4}$'"]


@pytest.mark.parametrize("factory", ENGINES)
async def test_without_failures_the_text_is_unchanged_and_data_counts_zero(factory: Any) -> None:
    async with factory(TIGHT_CONFIG, _Provider()) as engine:
        result = await WorkflowTool(engine).execute(_call("return await agent('x')"))
    assert result.text == 'workflow "invoices" completed (1 agent).\nReturn value:\n"ok"'
    assert set(result.data or {}) == {"run_id", "agents_started", "usage", "result",
                                      "agents_failed", "agents_cancelled"}
    assert result.data is not None and result.data["agents_failed"] == 0
    assert result.data["agents_cancelled"] == 0


@pytest.mark.parametrize("factory", ENGINES)
async def test_cancelled_children_are_counted_apart_in_the_text_and_data(factory: Any) -> None:
    script = "agent('hang'); await agent('bad1', {schema: args.schema}); return 1"
    async with factory(TIGHT_CONFIG, _Provider()) as engine:
        result = await WorkflowTool(engine).execute(_call(script))
    assert result.data is not None
    assert (result.data["agents_failed"], result.data["agents_cancelled"]) == (1, 1)
    assert result.text.split("\n")[-1].startswith("Agents failed: 1 failed, 1 cancelled of 2 — ")


def test_the_line_groups_by_kind_and_reason_most_frequent_first_and_is_bounded() -> None:
    def failure(kind: str, message: str) -> dict[str, Any]:
        return {"kind": kind, "message": message, "details": []}

    line = failures_line([failure("timeout", "t"), failure("provider", "HTTP 500 from x"),
                          failure("provider", "HTTP 500 from x"), failure("missing", "m")], 9)
    assert line == ("Agents failed: 4 of 9 — 2 provider (HTTP 500 from x), 1 timeout, "
                    "1 missing (m).")
    assert failures_line([], 3) is None
    many = [failure("provider", f"reason {i} " + "y" * 200) for i in range(50)]
    long_line = failures_line(many, 50)
    assert long_line is not None and len(long_line) <= 600
    assert long_line.startswith("Agents failed: 50 of 50 — 1 provider (reason 0 ")


@pytest.mark.parametrize("factory", ENGINES)
async def test_a_background_completion_carries_the_failures_too(factory: Any) -> None:
    delivered: list[Any] = []
    config = TIGHT_CONFIG.model_copy(update={"agent_timeout_s": 0.5})
    async with factory(config, _Provider()) as engine:
        async with WorkflowTool(engine, background=True, on_complete=delivered.append) as tool:
            started = await tool.execute(_call("return [await agent('hang'), await agent('x')]"))
            assert (started.data or {}).get("background") is True
            await await_until(lambda: delivered, what="the completion", timeout=20)
    (completion,) = delivered
    assert isinstance(completion, ToolResult)
    assert completion.text.split("\n")[-1] == "Agents failed: 1 of 2 — 1 timeout."
    assert (completion.data or {})["agents_failed"] == 1

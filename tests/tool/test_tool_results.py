"""Whole results (SPEC §26, docs/embedding.md "Whole results"): a cut result says how to read
the rest, and ``workflow_result(run_id, pointer?, offset?, limit?)`` reads it — from the run
store, or from the tool's last results when the engine has none — by JSON pointer and by
pages of exactly ``limit`` characters of the part's JSON as the tool's text renders it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from dsh_workflow import EngineConfig, QuickJSEngine, SQLiteRunStore, WorkflowTool
from dsh_workflow._tool.results import PartError, RecentResults, resolve_pointer, result_page
from dsh_workflow.testing import FunctionProvider

META = {"name": "findings", "description": "many findings"}
SCRIPT = """
const findings = await parallel(args.files.map((f) => () => agent('review ' + f)));
return {count: findings.length, findings: findings.map((text, i) => ({file: args.files[i],
        text, 'a/b~c': i}))};"""
FILES = [f"src/module_{i}.py" for i in range(12)]


def _value() -> dict[str, Any]:
    findings = [{"file": f, "text": f"reviewed review {f}", "a/b~c": i}
                for i, f in enumerate(FILES)]
    return {"count": len(FILES), "findings": findings}


def _provider() -> FunctionProvider:
    return FunctionProvider(lambda request: "reviewed " + request.prompt)


async def _pages(tool: WorkflowTool, run_id: str, limit: int, pointer: str = "") -> list[str]:
    pages: list[str] = []
    offset: int | None = 0
    while offset is not None:
        page = await tool.call("workflow_result", {"runId": run_id, "pointer": pointer,
                                                   "offset": offset, "limit": limit})
        assert not page.is_error, page.text
        assert page.data is not None
        pages.append(page.data["text"])
        offset = page.data["next_offset"]
    return pages


@pytest.mark.anyio
async def test_a_cut_result_is_read_whole_in_pages_without_a_store() -> None:
    async with QuickJSEngine(EngineConfig(), provider=_provider()) as engine:
        tool = WorkflowTool(engine, max_result_chars=200)
        done = await tool.execute({"meta": META, "script": SCRIPT, "args": {"files": FILES}})
        assert done.data is not None
        run_id = done.data["run_id"]
        hint = (f'read them with workflow_result({{"runId": "{run_id}", "offset": 200}}); a '
                'pointer such as "/findings/3" reads one part]')
        assert hint in done.text
        whole = json.dumps(_value(), indent=2, ensure_ascii=False)
        pages = await _pages(tool, run_id, 133)
        assert "".join(pages) == whole and len(pages) > 3
        assert all(len(page) == 133 for page in pages[:-1]) and 0 < len(pages[-1]) <= 133
        first = await tool.call("workflow_result", {"runId": run_id, "limit": 133})
        assert first.text.endswith(
            f'[characters 0-133 of {len(whole)} of the return value; next: workflow_result('
            f'{{"runId": "{run_id}", "offset": 133, "limit": 133}})]')
        part = await tool.call("workflow_result", json.dumps({"runId": run_id,
                                                              "pointer": "/findings/3"}))
        assert part.data is not None
        assert json.loads(part.data["text"]) == _value()["findings"][3]
        assert part.text.endswith("at '/findings/3'; the end]")
        escaped = await tool.call("workflow_result", {"runId": run_id,
                                                      "pointer": "/findings/5/a~1b~0c"})
        assert escaped.data is not None and escaped.data["text"] == "5"


@pytest.mark.anyio
async def test_a_stored_result_is_read_by_a_later_tool(tmp_path: Path) -> None:
    async with SQLiteRunStore(tmp_path / "runs.sqlite3") as store:
        async with QuickJSEngine(EngineConfig(), provider=_provider(), store=store) as engine:
            first = WorkflowTool(engine, max_result_chars=100)
            done = await first.execute({"meta": META, "script": SCRIPT,
                                        "args": {"files": FILES}})
            assert done.data is not None and "[truncated: " in done.text
            later = WorkflowTool(engine)  # remembers nothing: the store answers
            pages = await _pages(later, done.data["run_id"], 1000, "/findings")
            assert json.loads("".join(pages)) == _value()["findings"]
            failed = await first.execute({"meta": META, "script": "throw new Error('no')"})
            assert failed.data is not None
            refused = await later.call("workflow_result", {"runId": failed.data["run_id"]})
            assert refused.is_error and "did not complete (error)" in refused.text


@pytest.mark.anyio
@pytest.mark.parametrize(("arguments", "fragment"), [
    ({"runId": "r", "pointer": "/nope"}, "'/nope' names no key of the object"),
    ({"runId": "r", "pointer": "/findings/12"}, "past the end of the array (12 items)"),
    ({"runId": "r", "pointer": "/findings/01"}, "is not an index of the array"),
    ({"runId": "r", "pointer": "/count/x"}, "steps into a number"),
    ({"runId": "r", "pointer": "findings"}, "must be empty (the whole value) or start with '/'"),
    ({"runId": "r", "offset": 10**6}, "offset 1000000 is past the end of the part"),
    ({"runId": "r", "limit": 0}, "limit: must be a whole number from 1 to 50000"),
    ({"runId": "r", "offset": -1}, "offset: must be a whole number >= 0"),
    ({"runId": "r", "what": 1}, "what: not a parameter"),
    ({}, "runId: a run id is required"),
    ({"runId": "unknown"}, "no such run among this tool's last results"),
])
async def test_a_bad_call_is_an_error_result(arguments: dict[str, Any], fragment: str) -> None:
    async with QuickJSEngine(EngineConfig(), provider=_provider()) as engine:
        tool = WorkflowTool(engine, recent_results=RecentResults())
        tool._recent.remember("r", _value(), 10)  # the run a script would make
        result = await tool.call("workflow_result", arguments)
    assert result.is_error and fragment in result.text, result.text


def test_recent_results_are_bounded() -> None:
    recent = RecentResults(max_runs=2, max_chars=100)
    recent.remember("a", 1, 10)
    recent.remember("b", 2, 10)
    recent.remember("c", 3, 10)
    assert [recent.get(k)[0] for k in "abc"] == [False, True, True]
    recent.remember("d", 4, 95)
    assert [recent.get(k)[0] for k in "bcd"] == [False, False, True]
    recent.remember("huge", 5, 101)
    assert recent.get("huge") == (False, None) and recent.get("d") == (True, 4)


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=4)
                    | st.dictionaries(st.text(alphabet="ab/~0é", max_size=3), inner, max_size=4),
                    max_leaves=20)


def _paths(value: Any, prefix: str = "") -> list[tuple[str, Any]]:
    found = [(prefix, value)]
    if isinstance(value, dict):
        for key, item in value.items():
            token = key.replace("~", "~0").replace("/", "~1")
            found += _paths(item, f"{prefix}/{token}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, f"{prefix}/{index}")
    return found


@given(JSON)
def test_every_part_has_the_pointer_rfc_6901_gives_it(value: Any) -> None:
    for pointer, part in _paths(value):
        assert resolve_pointer(value, pointer) == part


@given(JSON, st.integers(1, 40))
def test_pages_are_exactly_limit_characters_and_join_to_the_whole(value: Any, limit: int) -> None:
    whole = json.dumps(value, indent=2, ensure_ascii=False)
    offset: int | None = 0
    text = ""
    while offset is not None:
        page = result_page("r", value, pointer="", offset=offset, limit=limit)
        assert len(page.text) == limit or page.next_offset is None
        text += page.text
        offset = page.next_offset
    assert text == whole
    with pytest.raises(PartError):
        result_page("r", value, pointer="", offset=len(whole) + 1, limit=limit)

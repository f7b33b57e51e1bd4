"""``workflow(name | {scriptPath}, args?)``: saved workflows run inline (docs/embedding.md, "Saved
workflows and `workflow()`").

On both engines and both backends: the nested workflow shares the parent's concurrency cap,
total-agent counter, budget, cancellation, journal and events; nesting is one level; unknown
names and engines without a library are fatal INVALID_ARGUMENT listing what is available.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from _support import ENGINE_SKIPS, subprocess_factory

from dsh_workflow import (
    AgentStarted,
    EngineConfig,
    PhaseStarted,
    QuickJSEngine,
    SQLiteRunStore,
    SubagentRequest,
    SubagentResult,
    Usage,
    WorkflowEvent,
    WorkflowLibrary,
    WorkflowStartRequest,
)
from dsh_workflow.testing import FunctionProvider, GatedProvider, check_run_events

META = {"name": "parent", "description": "calls saved workflows"}


def _engines() -> dict[str, Any]:
    engines: dict[str, Any] = {"quickjs": lambda config, provider, **kw: QuickJSEngine(
        config, provider=provider, **kw)}
    if subprocess_factory(pool_size=1) is not None:
        from dsh_workflow import SubprocessEngine

        engines["subprocess"] = lambda config, provider, **kw: SubprocessEngine(
            config, provider=provider, pool_size=1, **kw)
    else:
        engines["subprocess"] = None
    return engines


ENGINES = _engines()


@pytest.fixture(params=sorted(ENGINES))
def make_engine(request: pytest.FixtureRequest) -> Any:
    factory = ENGINES[request.param]
    if factory is None:
        pytest.skip(ENGINE_SKIPS.get(request.param, "engine unavailable"))
    return factory


def write(folder: Path, name: str, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.js"
    path.write_text(f"export const meta = {{ name: '{name}', description: 'saved {name}' }};\n"
                    + body, "utf-8")
    return path


@pytest.fixture
def library(tmp_path: Path) -> WorkflowLibrary:
    folder = tmp_path / "workflows"
    write(folder, "summarize", """
        phase('summarize');
        const parts = await parallel(args.items.map(i => () => agent('sum ' + i, {label: 'S' + i})));
        return {parts, count: parts.length};""")
    write(folder, "outer", "return await workflow('summarize', {items: ['x']});")
    write(folder, "sneaky", "return await globalThis.workflow('summarize', {items: ['y']});")
    write(folder, "fails", "await agent('one'); throw new Error('inner failure');")
    write(folder, "spins", "while (true) {}")
    write(folder, "clock", "return [Date.now(), Math.random(), await agent('c ' + args.n)];")
    return WorkflowLibrary([folder], base_dir=tmp_path)


async def run(make_engine: Any, library: WorkflowLibrary | None, script: str,
              provider: Any = None, config: EngineConfig | None = None,
              **kw: Any) -> tuple[Any, list[WorkflowEvent]]:
    events: list[WorkflowEvent] = []
    async with make_engine(config or EngineConfig(), provider or FunctionProvider(),
                           library=library, **kw) as engine:
        engine.events.subscribe(events.append)
        started = engine.start(WorkflowStartRequest(meta=META, script=script))
        with anyio.fail_after(20):
            result = await started.result()
        await started.dispose()
    check_run_events(events, started, result)
    return result, events


@pytest.mark.anyio
async def test_runs_inline_and_resolves_to_its_value(make_engine: Any,
                                                     library: WorkflowLibrary) -> None:
    result, events = await run(make_engine, library, """
        phase('parent');
        const a = await workflow('summarize', {items: ['a', 'b']});
        const b = await workflow({scriptPath: 'workflows/summarize.js'}, {items: ['c']});
        return {a, b, args: typeof args};""")
    assert result.value == {"a": {"parts": ["ok:sum a", "ok:sum b"], "count": 2},
                            "b": {"parts": ["ok:sum c"], "count": 1}, "args": "undefined"}
    assert result.agents_started == 3
    phases = [e.title for e in events if isinstance(e, PhaseStarted)]
    assert phases == ["parent", "summarize", "summarize"]
    labels = [e.label for e in events if isinstance(e, AgentStarted)]
    assert labels == ["Sa", "Sb", "Sc"], "the nested agents appear in the parent run"


@pytest.mark.anyio
async def test_nesting_is_one_level(make_engine: Any, library: WorkflowLibrary) -> None:
    result, _ = await run(make_engine, library, "return await workflow('outer');")
    assert (result.stop_reason == "error" and result.error_code == "UNSUPPORTED_OPTION"
            and result.error.startswith("UNSUPPORTED_OPTION:"))
    assert "one level" in result.error


@pytest.mark.anyio
async def test_unknown_names_and_missing_library_list_what_exists(
        make_engine: Any, library: WorkflowLibrary) -> None:
    result, _ = await run(make_engine, library, "return await workflow('nope');")
    assert (result.error is not None and result.error_code == "INVALID_ARGUMENT"
            and result.error.startswith("INVALID_ARGUMENT:"))
    assert "clock, fails, outer, sneaky, spins, summarize" in result.error
    caught, _ = await run(make_engine, library, """
        try { await workflow('nope'); } catch (e) { return [e.code, e.fatal]; }""")
    assert caught.value == ["INVALID_ARGUMENT", True]
    none, _ = await run(make_engine, None, "return await parallel([() => workflow('x')]);")
    assert (none.error is not None and none.error_code == "INVALID_ARGUMENT"
            and none.error.startswith("INVALID_ARGUMENT:"))
    assert "available: none" in none.error


@pytest.mark.anyio
@pytest.mark.parametrize("target", ["42", "''", "{}", "{scriptPath: 3}", "{scriptPath: 'a', x: 1}",
                                    "{scriptPath: '/etc/passwd'}",
                                    "{scriptPath: '../../../etc/hostname'}"])
async def test_bad_targets_are_fatal(make_engine: Any, library: WorkflowLibrary,
                                     target: str) -> None:
    result, _ = await run(make_engine, library,
                          f"return await parallel([() => workflow({target})]);")
    assert (result.stop_reason == "error" and result.error_code == "INVALID_ARGUMENT"
            and result.error.startswith("INVALID_ARGUMENT:")), result


@pytest.mark.anyio
async def test_a_failing_workflow_throws_fatally_in_the_parent(make_engine: Any,
                                                               library: WorkflowLibrary) -> None:
    result, _ = await run(make_engine, library, """
        const r = await parallel([() => workflow('fails'), () => agent('sibling')]);
        return r;""")
    assert result.stop_reason == "error"
    assert "inner failure" in result.error and 'workflow("fails")' in result.error


@pytest.mark.anyio
async def test_shares_the_total_agent_cap_and_the_budget(make_engine: Any,
                                                          library: WorkflowLibrary) -> None:
    capped, _ = await run(make_engine, library, """
        await agent('parent one');
        return await workflow('summarize', {items: ['a', 'b']});""",
                          config=EngineConfig(max_total_agents=2))
    assert capped.error is not None and capped.error_code == "AGENT_CAP" and capped.error.startswith("AGENT_CAP:")
    costly = FunctionProvider(lambda request: SubagentResult(
        text="t", usage=Usage(input_tokens=5, output_tokens=5)))
    budgeted, _ = await run(make_engine, library, """
        await agent('parent');
        const r = await workflow('summarize', {items: ['a', 'b', 'c']});
        return [r, budget.spent()];""", provider=costly,
                            config=EngineConfig(budget_tokens=20, max_concurrent_agents=1))
    assert (budgeted.error is not None and budgeted.error_code == "BUDGET_EXCEEDED"
            and budgeted.error.startswith("BUDGET_EXCEEDED:"))


@pytest.mark.anyio
async def test_shares_the_concurrency_cap_and_cancellation(make_engine: Any,
                                                           library: WorkflowLibrary) -> None:
    gate = GatedProvider()
    async with make_engine(EngineConfig(max_concurrent_agents=2), gate,
                           library=library) as engine:
        started = engine.start(WorkflowStartRequest(meta=META, script="""
            return await parallel([
              () => workflow('summarize', {items: ['a', 'b', 'c']}),
              () => agent('parent')]);"""))
        await gate.wait_running(2)
        await anyio.sleep(0.2)
        assert gate.max_running == 2, "the nested workflow shares the parent's slots"
        started.cancel("stop")
        with anyio.fail_after(10):
            result = await started.result()
        await started.dispose()
    assert result.stop_reason == "cancelled"
    assert sorted(gate.cancelled) == sorted(gate.started)


@pytest.mark.anyio
async def test_a_spinning_workflow_trips_the_parents_slice_limit(
        make_engine: Any, library: WorkflowLibrary) -> None:
    result, _ = await run(make_engine, library, "return await workflow('spins');",
                          config=EngineConfig(slice_cpu_limit_s=0.2))
    assert (result.error is not None and result.error_code == "RESOURCE_LIMIT"
            and result.error.startswith("RESOURCE_LIMIT:"))


@pytest.mark.anyio
async def test_recursion_through_the_global_is_bounded(make_engine: Any, tmp_path: Path) -> None:
    folder = tmp_path / "wf"
    write(folder, "self", "return await globalThis.workflow('self');")
    result, _ = await run(make_engine, WorkflowLibrary([folder]), "return await workflow('self');",
                          config=EngineConfig(max_total_agents=30))
    assert result.stop_reason == "error"
    assert result.error_code in ("AGENT_CAP", "RESOURCE_LIMIT"), result
    assert result.error.startswith(f"{result.error_code}:"), result.error


@pytest.mark.anyio
async def test_a_resumed_parent_replays_its_nested_children(make_engine: Any,
                                                            library: WorkflowLibrary,
                                                            tmp_path: Path) -> None:
    calls: list[str] = []

    def reply(request: SubagentRequest) -> str:
        calls.append(request.prompt)
        return "ok:" + request.prompt

    script = "return await workflow('clock', {n: 1});"
    async with SQLiteRunStore(tmp_path / "runs.sqlite3") as store:
        async with make_engine(EngineConfig(), FunctionProvider(reply), library=library,
                               store=store) as engine:
            first = engine.start(WorkflowStartRequest(meta=META, script=script))
            one = await first.result()
            await first.dispose()
            calls.clear()
            again = engine.start(WorkflowStartRequest(meta=META, script=script,
                                                      resume_from=first.id))
            two = await again.result()
            await again.dispose()
    assert two.value == one.value and calls == [] and two.agents_replayed == 1


@pytest.mark.anyio
async def test_script_path_refusals_are_one_text_for_missing_and_outside(
        make_engine: Any, library: WorkflowLibrary, tmp_path: Path) -> None:
    outside = write(tmp_path.parent / f"{tmp_path.name}-outside", "secret", "return 1")
    missing = outside.with_name("nothing.js")
    result, _ = await run(make_engine, library, f"""
        const out = [];
        for (const p of [{str(outside)!r}, {str(missing)!r}]) {{
          try {{ await workflow({{scriptPath: p}}); out.push('ran'); }}
          catch (e) {{ out.push(e.message.replace(p, '<path>')); }}
        }}
        return out;""")
    assert result.stop_reason == "completed", result.error
    first, second = result.value
    assert first == second, result.value
    assert "is not a .js file inside the workflow folders" in first


@pytest.mark.anyio
async def test_a_saved_workflows_value_is_json_as_stringify_makes_it(
        make_engine: Any, tmp_path: Path) -> None:
    folder = tmp_path / "lossy-workflows"
    write(folder, "lossy", "return {when: new Date(0), pending: agent('p'), gaps: [1, undefined],"
                           " f: () => 1};")
    write(folder, "bigint", "return {n: 1n};")
    write(folder, "badjson", "return {x: {toJSON() { throw new Error('no json'); }}};")
    library = WorkflowLibrary([folder], base_dir=tmp_path)
    result, _ = await run(make_engine, library, """
        const inner = await workflow('lossy');
        let big = null, bad = null;
        try { await workflow('bigint'); } catch (e) { big = [e.code, e.message]; }
        try { await workflow('badjson'); } catch (e) { bad = [e.code, e.message]; }
        return {inner, big, bad};""")
    assert result.stop_reason == "completed", result
    value = result.value
    assert value["inner"] == {"when": "1970-01-01T00:00:00.000Z", "pending": {},
                              "gaps": [1, None]}
    assert result.warnings == (
        'workflow("lossy") return value.pending: a Promise became {} (missing await?)',
        'workflow("lossy") return value.gaps[1]: undefined became null',
        'workflow("lossy") return value.f: a function was dropped')
    assert value["big"][0] == "RESULT_UNSERIALIZABLE"
    assert 'workflow("bigint") return value.n: bigints' in value["big"][1]
    assert value["bad"][0] == "AGENT_FAILED"
    assert 'workflow("badjson") failed: Error: no json' in value["bad"][1]
    assert 'workflow("badjson") return value.x' in value["bad"][1]

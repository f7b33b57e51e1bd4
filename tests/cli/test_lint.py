"""``dsh-workflow check`` warnings: unknown agent() options, missing globals, unknown agent types."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from _support import run_cli

from dsh_workflow import (
    AgentDefinition,
    AgentRegistry,
    EchoProvider,
    QuickJSEngine,
    WorkflowStartRequest,
)
from dsh_workflow._cli.lint import FILTER_BOOLEAN, MISSING_GLOBALS, lint

REGISTRY = AgentRegistry.from_definitions([AgentDefinition(name="reviewer")])


def found(body: str, agents: AgentRegistry | None = REGISTRY) -> list[tuple[int, int, str]]:
    return [(w.line, w.column, w.message) for w in lint(body, agents=agents)]


def test_unknown_option_keys_are_reported_at_the_key() -> None:
    body = ("const a = await agent('x', {label: 'l', temperature: 0.2});\n"
            "await subagent(`y`, {\n  'maxTurns': 3,\n  effort: 'high',\n});\n")
    assert [(line, col) for line, col, _ in found(body)] == [(1, 41), (3, 3)]
    messages = [m for _, _, m in found(body)]
    assert '"temperature"' in messages[0] and "agentType" in messages[0]
    assert messages[1].startswith('subagent() option "maxTurns"')


def test_supported_spread_shorthand_and_computed_keys_are_not_flagged() -> None:
    body = ("const label = 'l'; const k = 'model';\n"
            "await agent('x', {label, ...extra, [k]: 'm', phase: 'p', schema: s, model: 'm',"
            " provider: 'p', effort: 'low', agentType: 'reviewer', isolation: 'worktree'});\n")
    assert found(body) == []


def test_literal_option_values_are_checked() -> None:
    body = ("await agent('x', {effort: 'extreme'});\n"
            "await agent('x', {isolation: `container`});\n"
            "await agent('x', {agentType: 'ghost'});\n"
            "await agent('x', {agentType: name, effort: level});\n")
    result = found(body)
    assert [(line, col) for line, col, _ in result] == [(1, 27), (2, 30), (3, 30)]
    assert '"low", "medium", "high", "xhigh", "max"' in result[0][2]
    assert '"worktree"' in result[1][2]
    assert '"ghost"' in result[2][2] and "general-purpose, reviewer" in result[2][2]
    assert found("await agent('x', {agentType: 'ghost'});", agents=None) == []


def test_failure_option_is_known_and_its_literal_values_checked() -> None:
    assert found("await agent('x', {failure: 'throw'}); await agent('y', {failure: 'null'});"
                 " await agent('z', {failure: mode});") == []
    [(line, col, message)] = found("await agent('x', {failure: 'raise'});")
    assert (line, col) == (1, 28)
    assert message == 'agent() option "failure" must be one of "null", "throw" (got "raise")'


def test_unknown_agent_options_such_as_stall_ms_are_still_reported() -> None:
    [(line, col, message)] = found("await agent('x', {label: 'l', stallMs: 60000});")
    assert (line, col) == (1, 31)
    assert message.startswith('agent() option "stallMs" is not supported')
    assert "failure" in message and "label" in message


def test_concurrency_options_of_parallel_and_pipeline_are_checked() -> None:
    body = ("await parallel(xs, {concurrency: 4});\n"
            "await pipeline(xs, a, b, {concurrency: n});\n"
            "await parallel(xs, {concurrency: 0});\n"
            "await pipeline(xs, a, {concurrency: 1.5, limit: 2});\n"
            "await parallel(xs, {concurency: 2});\n"
            "await parallel(xs, {concurrency: '3'});\n"
            "await pipeline(xs, {concurrency: -2});\n"
            "await pipeline(xs, {notAStage: 1});\n")
    result = found(body)
    assert [(line, col) for line, col, _ in result] == [(3, 34), (4, 37), (4, 42), (5, 21),
                                                          (6, 34)]
    assert result[0][2] == ('parallel() option "concurrency" must be a whole number of at least '
                            "1 (got 0)")
    assert "1.5" in result[1][2]
    assert result[2][2].startswith('pipeline() option "limit" is not supported')
    assert result[3][2].startswith('parallel() option "concurency" is not supported')
    assert "'3'" in result[4][2]


def test_missing_globals_are_reported_once_per_use() -> None:
    body = ("setTimeout(() => {}, 10);\n"
            "const data = await fetch('https://example.com');\n"
            "const env = process.env.HOME; const fs2 = require('fs');\n"
            "const mod = await import('./x.js');\n"
            "console.log(window.location, Deno, Bun, document);\n")
    names = [(line, col) for line, col, _ in found(body)]
    assert names == [(1, 1), (2, 20), (3, 13), (3, 43), (4, 19), (5, 13), (5, 30), (5, 36),
                     (5, 41)]
    assert "import()" in found(body)[4][2]


def test_strings_comments_regexes_and_own_names_are_not_code() -> None:
    body = ("// setTimeout(() => {}) and agent('x', {bogus: 1})\n"
            "/* require('fs') */ const re = /process\\.env|agent\\(/;\n"
            "const s = 'fetch(url)' + \"window\" + `document ${1 + 1} agent('x', {bad: 1})`;\n"
            "const fs = args.files; function f(process) { return process; }\n"
            "try { g(); } catch (require) { log(String(require)); }\n"
            "const obj = {setTimeout: 1, window: 2}; obj.setTimeout; obj.fetch;\n"
            "const { navigator } = args; const [Bun] = [1]; const h = (document) => document;\n"
            "return [fs, navigator, Bun, h];\n")
    assert found(body) == []


def test_lint_survives_code_that_does_not_parse() -> None:
    assert isinstance(lint("await agent('x', {temperature: 1}); {{{"), list)


@pytest.mark.anyio
async def test_every_missing_global_is_really_missing_in_the_sandbox() -> None:
    names = sorted(MISSING_GLOBALS)
    script = f"return {json.dumps(names)}.filter((n) => typeof globalThis[n] !== 'undefined')"
    async with QuickJSEngine(provider=EchoProvider()) as engine:
        run = engine.start(WorkflowStartRequest(meta={"name": "g", "description": "d"},
                                                script=script))
        result = await run.result()
        await run.dispose()
    assert result.value == [], result


def test_check_prints_warnings_with_lines_and_exits_0(tmp_path: Path) -> None:
    script = tmp_path / "flow.js"
    script.write_text(
        "export const meta = {\n  name: 'flow',\n  description: 'd',\n};\n"
        "const r = await agent('x', {agentType: 'ghost', temperature: 0});\n"
        "setTimeout(() => {}, 1);\nreturn r;\n", encoding="utf-8")
    agents = tmp_path / "agents"
    agents.mkdir()
    (agents / "a.md").write_text("---\nname: known\n---\nHi\n", encoding="utf-8")
    done = run_cli("check", script, "--agents", agents, home=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ok: flow: meta is valid and the script parses (3 warnings)\n"
    lines = done.stderr.splitlines()
    assert lines[0].startswith(f"{script}:5:40: warning: agent type \"ghost\"")
    assert "known" in lines[0]
    assert lines[1].startswith(f"{script}:5:49: warning: agent() option \"temperature\"")
    assert lines[2].startswith(f"{script}:6:1: warning: `setTimeout`")


def test_check_of_a_clean_script_prints_no_warning(tmp_path: Path) -> None:
    script = tmp_path / "flow.js"
    script.write_text("export const meta = {name: 'flow', description: 'd'};\n"
                      "return await agent('x', {effort: 'low', agentType: 'general-purpose'});\n",
                      encoding="utf-8")
    done = run_cli("check", script, home=tmp_path, cwd=tmp_path)
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == "ok: flow: meta is valid and the script parses\n"


def test_filter_boolean_after_a_parallel_of_schema_calls_names_settle() -> None:
    chained = "const r = (await parallel(xs.map(x => () => agent(x, {schema: S})))).filter(Boolean);"
    named = ("let rs;\nrs = await parallel(xs.map(x => () => subagent(x, {label: 'l', schema})));\n"
             "return rs.filter(Boolean);")
    assert found(chained) == [(1, 70, FILTER_BOOLEAN)]
    assert found(named) == [(3, 11, FILTER_BOOLEAN)]
    assert "settle(" in FILTER_BOOLEAN


@pytest.mark.parametrize("body", [
    pytest.param("const rs = await parallel(xs.map(x => () => agent(x)));\n"
                 "return rs.filter(Boolean);", id="no-schema-call"),
    pytest.param("const rs = await parallel(xs.map(x => () => agent(x, {schema})));\n"
                 "return rs.filter(r => r !== null);", id="another-filter"),
    pytest.param("const rs = await settle(xs.map(x => () => agent(x, {schema})));\n"
                 "return rs.filter(Boolean);", id="settle"),
    pytest.param("const rs = await pipeline(xs, x => agent(x, {schema}));\n"
                 "return rs.filter(Boolean);", id="pipeline"),
    pytest.param("const rs = xs.map(x => agent(x, {schema}));\nreturn rs.filter(Boolean);",
                 id="no-parallel"),
])
def test_filter_boolean_elsewhere_is_not_flagged(body: str) -> None:
    assert found(body) == []


def test_settle_options_are_checked_like_parallels() -> None:
    [(line, col, message)] = found("await settle(ts, {concurrency: 2, limit: 3});")
    assert (line, col) == (1, 35) and message.startswith('settle() option "limit"')


def test_check_warns_about_filter_boolean_and_names_settle(tmp_path: Path) -> None:
    script = tmp_path / "flow.js"
    script.write_text(
        "export const meta = {name: 'flow', description: 'd'};\n"
        "const S = {type: 'object', properties: {n: {type: 'integer'}}};\n"
        "const all = await parallel(args.items.map(i => () => agent(i, {schema: S})));\n"
        "return all.filter(Boolean);\n", encoding="utf-8")
    done = run_cli("check", script, home=tmp_path, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "ok: flow: meta is valid and the script parses (1 warning)\n"
    [line] = done.stderr.splitlines()
    assert line.startswith(f"{script}:4:12: warning: .filter(Boolean) after parallel()")
    assert "settle(thunks)" in line

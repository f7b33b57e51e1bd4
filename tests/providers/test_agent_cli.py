"""The agent command-line presets (docs/providers.md): ClaudeCodeProvider and CodexProvider
against executables on PATH that reproduce each CLI's documented JSON output and record the
flags, stdin and folder they were given; the engine's agent definitions and worktree isolation
reach them; the CLI's --provider claude|codex runs them in real processes."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import anyio
import genai_prices
import pytest
from _support import REPO, cli_env, run_cli

from dsh_workflow import (
    AgentDefinition,
    AgentRegistry,
    ClaudeCodeProvider,
    CodexProvider,
    EngineConfig,
    QuickJSEngine,
    SubagentRequest,
    Usage,
    WorkflowStartRequest,
)
from dsh_workflow._providers.agent_cli import CLAUDE_CODE_VERSION, CODEX_VERSION, agent_cli_env

FAKES = Path(__file__).resolve().parent / "fake_clis"
SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
REVIEWER = AgentDefinition(name="reviewer", system_prompt="You review code.\nBe \"terse\".",
                           tools=("Read", "Grep"))
WRITER = AgentDefinition(name="writer", system_prompt="You write.", tools=("Read", "Edit"))


@pytest.fixture
def logs(tmp_path: Path) -> dict[str, Path]:
    return {"claude": tmp_path / "claude.log", "codex": tmp_path / "codex.log"}


def fake_env(logs: dict[str, Path]) -> dict[str, str]:
    env = agent_cli_env()
    env["PATH"] = f"{FAKES}{os.pathsep}{env['PATH']}"
    env["CLAUDE_FAKE_LOG"] = str(logs["claude"])
    env["CODEX_FAKE_LOG"] = str(logs["codex"])
    return env


def calls(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def request(prompt: str = "hello there", **fields: Any) -> SubagentRequest:
    return SubagentRequest(prompt=prompt, label="child", run_id="run-1", seq=1, **fields)


def test_the_presets_name_the_cli_version_they_follow() -> None:
    assert f"Claude Code {CLAUDE_CODE_VERSION}" in (ClaudeCodeProvider.__doc__ or "")
    assert CODEX_VERSION in (CodexProvider.__doc__ or "")
    manual = "\n".join(page.read_text(encoding="utf-8")  # README.md and docs/: the manual
                        for page in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))])
    assert f"Claude Code {CLAUDE_CODE_VERSION}" in manual and CODEX_VERSION in manual


@pytest.mark.anyio
async def test_claude_gets_its_flags_and_the_answer_usage_and_cost_come_from_its_json(
        logs: dict[str, Path]) -> None:
    provider = ClaudeCodeProvider(model="claude-sonnet-4-5", env=fake_env(logs))
    result = await provider.run(request(effort="max", agent=REVIEWER, agent_type="reviewer"))
    assert result.stop_reason == "completed" and result.text == "claude says: hello there"
    assert result.usage == Usage(input_tokens=1234 + 450 + 8900, output_tokens=567,
                                 cache_read_tokens=8900, cache_write_tokens=450,
                                 cost_usd=0.0432)  # the reported cost wins
    assert result.model == "claude-sonnet-4-5"  # modelUsage names the model that answered
    (call,) = calls(logs["claude"])
    assert call["stdin"] == "hello there"
    assert call["argv"] == ["-p", "--output-format", "json", "--model=claude-sonnet-4-5",
                            "--effort=max",
                            '--append-system-prompt=You review code.\nBe "terse".',
                            "--allowedTools=Read,Grep"]


@pytest.mark.anyio
async def test_claude_call_model_wins_and_failures_and_schemas(logs: dict[str, Path]) -> None:
    provider = ClaudeCodeProvider(env=fake_env(logs), extra_args=["--permission-mode",
                                                                  "acceptEdits"])
    plain = await provider.run(request(model="haiku"))
    assert plain.stop_reason == "completed"
    failed = await provider.run(request("please FAIL"))
    assert failed.stop_reason == "error" and "it broke" in (failed.error or "")
    assert failed.usage is not None and failed.usage.cost_usd == 0.0432  # failed children pay
    typed = await provider.run(request("give JSON", schema=SCHEMA))
    assert typed.stop_reason == "completed" and typed.structured == {"n": 7}
    first, second, third = calls(logs["claude"])
    assert first["argv"] == ["-p", "--output-format", "json", "--model=haiku",
                             "--permission-mode", "acceptEdits"]
    assert second["argv"] == ["-p", "--output-format", "json", "--permission-mode",
                              "acceptEdits"]  # no model, effort or definition: no flag
    assert third["stdin"].startswith("give JSON") and json.dumps(SCHEMA) in third["stdin"]


@pytest.mark.anyio
async def test_codex_gets_its_flags_and_leaves_its_usage_to_the_engine_to_price(
        logs: dict[str, Path]) -> None:
    provider = CodexProvider(model="gpt-4o", env=fake_env(logs))
    result = await provider.run(request(effort="max", agent=REVIEWER))
    assert result.stop_reason == "completed"
    assert result.text == "codex says: hello there"  # the last agent_message
    assert result.usage is not None
    assert (result.usage.input_tokens, result.usage.output_tokens,
            result.usage.cache_read_tokens) == (2345, 678, 1200)
    # Codex reports neither a cost nor the model that answered: the engine prices it
    assert result.usage.cost_usd is None and result.model is None
    (call,) = calls(logs["codex"])
    assert call["stdin"] == "hello there"
    assert call["argv"] == ["exec", "--json", "--skip-git-repo-check", "--model=gpt-4o",
                            '--config=model_reasoning_effort="xhigh"',
                            '--config=developer_instructions="You review code.\\nBe \\"terse\\"."',
                            "--sandbox=read-only", "-"]


@pytest.mark.anyio
async def test_codex_failures_schemas_and_an_unknown_model(logs: dict[str, Path]) -> None:
    provider = CodexProvider(env=fake_env(logs))
    failed = await provider.run(request("FAIL now"))
    assert failed.stop_reason == "error" and "the model is overloaded" in (failed.error or "")
    typed = await provider.run(request("JSON please", schema=SCHEMA, agent=WRITER,
                                       effort="low"))
    assert typed.structured == {"n": 7}
    assert typed.usage is not None and typed.usage.cost_usd is None  # priced by the engine
    _, second = calls(logs["codex"])
    assert second["argv"] == ["exec", "--json", "--skip-git-repo-check",
                              '--config=model_reasoning_effort="low"',
                              '--config=developer_instructions="You write."',
                              "--sandbox=workspace-write", "-"]


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


@pytest.mark.anyio
@pytest.mark.parametrize("preset", [ClaudeCodeProvider, CodexProvider])
async def test_definitions_and_worktree_isolation_reach_the_cli_through_the_engine(
        preset: Any, logs: dict[str, Path], tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "README").write_text("hi\n")
    _git(repo, "init", "-q", "-b", "main")
    _git(repo, "-c", "user.name=dev", "-c", "user.email=dev@localhost", "commit", "-q",
         "--allow-empty", "-m", "first")
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "reviewer.md").write_text("---\nname: reviewer\ndescription: reviews\n"
                                        "tools: Read, Grep\n---\nYou review code.\n")
    agents = AgentRegistry([folder])
    provider = preset(env=fake_env(logs), cwd=repo, worktree_dir=tmp_path / "trees")
    script = """return [await agent('isolated one', {agentType: 'reviewer', isolation: 'worktree',
                                                   model: 'gpt-4o', effort: 'high'}),
                       await agent('shared one')];"""
    async with QuickJSEngine(EngineConfig(), provider=provider, agents=agents) as engine:
        run = engine.start(WorkflowStartRequest(meta={"name": "cli", "description": "d"},
                                                script=script))
        with anyio.fail_after(60):
            result = await run.result()
    assert result.stop_reason == "completed", result.error
    isolated, shared = calls(logs["claude" if preset is ClaudeCodeProvider else "codex"])
    assert Path(isolated["cwd"]).parent == tmp_path / "trees"  # ran inside its own worktree
    assert Path(shared["cwd"]) == repo
    assert "--model=gpt-4o" in isolated["argv"] and "You review code." in " ".join(isolated["argv"])
    assert not any("You review" in arg for arg in shared["argv"])


def cli(*argv: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return run_cli(*argv, cwd=cwd, env={**cli_env(store=cwd / "runs.sqlite3"), **env})


def test_the_cli_runs_the_presets_found_on_path(logs: dict[str, Path], tmp_path: Path) -> None:
    (tmp_path / "wf.js").write_text(
        "export const meta = {name: 'presets', description: 'agent CLIs as children'};\n"
        "return await agent('summarize the repo', {effort: 'medium'});\n")
    env = {"PATH": f"{FAKES}{os.pathsep}{os.environ['PATH']}",
           "CLAUDE_FAKE_LOG": str(logs["claude"]), "CODEX_FAKE_LOG": str(logs["codex"])}
    done = cli("run", "wf.js", "--provider", "claude", "--model", "sonnet", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == "claude says: summarize the repo"
    assert "$0.0432" in done.stderr  # the CLI's reported cost, in the final line
    assert calls(logs["claude"])[0]["argv"][:4] == ["-p", "--output-format", "json",
                                                    "--model=sonnet"]
    listed = json.loads(cli("runs", "--json", cwd=tmp_path, env=env).stdout)
    assert listed[0]["cost_usd"] == pytest.approx(0.0432)
    done = cli("run", "wf.js", "--provider", "codex", "--model", "gpt-4o", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == "codex says: summarize the repo"
    expected = genai_prices.calc_price(  # priced by the engine for the preset's model
        genai_prices.Usage(input_tokens=2345, output_tokens=678, cache_read_tokens=1200),
        model_ref="gpt-4o").total_price
    assert f"${float(expected):.4f}" in done.stderr
    assert calls(logs["codex"])[0]["argv"][3:5] == ["--model=gpt-4o",
                                                    '--config=model_reasoning_effort="medium"']


@pytest.mark.anyio
async def test_xhigh_effort_reaches_both_clis_as_their_own_level(logs: dict[str, Path]) -> None:
    """Claude Code's ``xhigh`` level (SPEC §26): both CLIs have it, so it is passed as it is."""
    claude = await ClaudeCodeProvider(env=fake_env(logs)).run(request(effort="xhigh"))
    codex = await CodexProvider(env=fake_env(logs)).run(request(effort="xhigh"))
    assert claude.stop_reason == codex.stop_reason == "completed"
    (claude_call,) = calls(logs["claude"])
    (codex_call,) = calls(logs["codex"])
    assert claude_call["argv"][-1] == "--effort=xhigh"
    assert '--config=model_reasoning_effort="xhigh"' in codex_call["argv"]


# -- faults classified at the seam (SPEC §23) -----------------------------------------------------

PRESETS = {"claude": ClaudeCodeProvider, "codex": CodexProvider}


@pytest.mark.anyio
@pytest.mark.parametrize(("preset", "prompt", "kind"), [
    ("claude", "BADKEY", "auth"), ("claude", "RATE", "rate_limited"),
    ("claude", "OVERLOAD", "overloaded"), ("claude", "please FAIL", "other"),
    ("codex", "BADKEY", "auth"), ("codex", "NOMODEL", "not_found"),
    ("codex", "LIMIT", "limit"), ("codex", "RATE", "rate_limited"),
])
async def test_each_cli_failure_is_classified(logs: dict[str, Path], preset: str, prompt: str,
                                              kind: str) -> None:
    result = await PRESETS[preset](env=fake_env(logs)).run(request(prompt))
    assert result.stop_reason == "error" and result.error_kind == kind, result.error


@pytest.mark.anyio
async def test_claudes_bad_key_reason_is_its_message(logs: dict[str, Path]) -> None:
    result = await ClaudeCodeProvider(env=fake_env(logs)).run(request("BADKEY"))
    assert (result.error or "").startswith("Invalid API key · Please run /login (claude: ")


@pytest.mark.anyio
async def test_claudes_usage_limit_is_a_limit_with_its_reset_time(logs: dict[str, Path]) -> None:
    from datetime import UTC, datetime

    result = await ClaudeCodeProvider(env=fake_env(logs)).run(request("LIMIT"))
    assert result.error_kind == "limit" and result.retry_at is not None
    hours = (result.retry_at - datetime.now(UTC)).total_seconds() / 3600
    assert 2.9 < hours <= 3.0


@pytest.mark.anyio
@pytest.mark.parametrize("preset", ["claude", "codex"])
async def test_a_bad_key_ends_the_run_at_the_first_child(logs: dict[str, Path],
                                                         preset: str) -> None:
    provider = PRESETS[preset](env=fake_env(logs))
    async with QuickJSEngine(EngineConfig(max_concurrent_agents=1), provider=provider) as engine:
        run = engine.start(WorkflowStartRequest(
            meta={"name": "keyed", "description": "d"},
            script="return await parallel([1, 2, 3].map((i) => () => agent('BADKEY ' + i)))"))
        result = await run.result()
        await run.dispose()
    assert result.error_code == "AGENT_FAILED"
    assert (result.error or "").startswith("AGENT_FAILED: agent 1 (BADKEY 1) failed (auth): ")
    assert len(calls(logs[preset])) == 1


@pytest.mark.anyio
@pytest.mark.parametrize("preset", ["claude", "codex"])
async def test_a_rate_limited_child_is_retried_by_the_engine(logs: dict[str, Path],
                                                             preset: str) -> None:
    from dsh_workflow import AgentRetried, RetryPolicy

    retried: list[AgentRetried] = []
    provider = PRESETS[preset](env=fake_env(logs))
    config = EngineConfig(retry=RetryPolicy(attempts=2, base_s=0.01))
    async with QuickJSEngine(config, provider=provider) as engine:
        engine.events.subscribe(lambda e: retried.append(e) if isinstance(e, AgentRetried)
                                else None)
        run = engine.start(WorkflowStartRequest(meta={"name": "rate", "description": "d"},
                                                script="return await agent('RATE')"))
        result = await run.result()
        await run.dispose()
    assert result.stop_reason == "completed" and result.value
    assert len(calls(logs[preset])) == 2
    assert [(r.attempt, r.cause) for r in retried] == [(1, "rate_limited")]


@pytest.mark.anyio
@pytest.mark.parametrize("preset", ["claude", "codex"])
async def test_a_schema_failure_is_kind_invalid_with_details(logs: dict[str, Path],
                                                             preset: str) -> None:
    from dsh_workflow import AgentEnded

    ends: list[AgentEnded] = []
    provider = PRESETS[preset](env=fake_env(logs))
    schema = {"type": "object", "properties": {"n": {"type": "string"}}, "required": ["n"]}
    async with QuickJSEngine(EngineConfig(), provider=provider) as engine:
        engine.events.subscribe(lambda e: ends.append(e) if isinstance(e, AgentEnded) else None)
        run = engine.start(WorkflowStartRequest(
            meta={"name": "schema", "description": "d"},
            script=f"return await agent('JSON please', {{schema: {json.dumps(schema)}}})"))
        result = await run.result()
        await run.dispose()
    assert result.value is None
    (end,) = ends
    assert end.error is not None and end.error.kind == "invalid"
    assert end.error.cause == "invalid_answer"
    assert end.error.details == ("/n: 7 is not of type 'string'",)


@pytest.mark.anyio
async def test_codexs_usage_limit_carries_when_to_try_again(logs: dict[str, Path]) -> None:
    from datetime import UTC, datetime, timedelta

    before = datetime.now(UTC)
    result = await CodexProvider(env=fake_env(logs)).run(request("LIMIT"))
    assert result.error_kind == "limit" and result.retry_at is not None
    wait = result.retry_at - before
    assert timedelta(days=3, hours=4) <= wait <= timedelta(days=3, hours=4, seconds=30)


@pytest.mark.parametrize(("text", "expected"), [
    ("Claude AI usage limit reached|1767225600", "2026-01-01T00:00:00+00:00"),
    ("You've hit your usage limit. Upgrade to Pro, or try again in 3 days 4 hours.",
     "2026-03-04T14:00:00+00:00"),
    ("try again in 1 hour, 30 minutes and 5 seconds", "2026-03-01T11:30:05+00:00"),
    ("You've hit your limit · resets 3pm (Europe/London)", "2026-03-01T15:00:00+00:00"),
    ("You've hit your limit · resets 9am (Europe/London)", "2026-03-02T09:00:00+00:00"),
    ("limit reached, resets 4:30 PM (America/New_York)", "2026-03-01T21:30:00+00:00"),
    ("You've hit your usage limit", None),
    ("resets 13pm (Europe/London)", None),
    ("try again in 99999999999 days", None),
])
def test_a_limits_reset_time_is_read_from_its_words(text: str, expected: str | None) -> None:
    from datetime import UTC, datetime

    from dsh_workflow._providers.agent_cli import reset_said

    now = datetime(2026, 3, 1, 10, 0, tzinfo=UTC)
    found = reset_said(text, now)
    assert (found.isoformat() if found else None) == expected


def test_a_reset_in_an_unknown_zone_is_read_in_the_local_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import time
    from datetime import UTC, datetime

    from dsh_workflow._providers.agent_cli import reset_said

    monkeypatch.setenv("TZ", "Asia/Tokyo")  # UTC+9, no daylight saving
    time.tzset()
    try:
        found = reset_said("resets 3pm (Not/A_Zone)", datetime(2026, 3, 1, 10, 0, tzinfo=UTC))
    finally:
        monkeypatch.undo()
        time.tzset()
    assert found == datetime(2026, 3, 2, 6, 0, tzinfo=UTC)  # 15:00 in Tokyo, next day


HOSTILE_CLAUDE = """#!/usr/bin/env python3
import sys
prompt = sys.stdin.read()
cost = "1e999" if "COST" in prompt else "0.01"
tokens = "1" + "0" * 400 if "TOKENS" in prompt else "10"
print('{"type": "result", "subtype": "success", "is_error": false, "result": "hi", '
      '"total_cost_usd": %s, "usage": {"input_tokens": %s, "output_tokens": 1}}' % (cost, tokens))
"""


@pytest.mark.anyio
async def test_claudes_hostile_numbers_fail_the_child_and_never_raise(tmp_path: Path) -> None:
    fake = tmp_path / "claude"
    fake.write_text(HOSTILE_CLAUDE)
    fake.chmod(0o755)
    provider = ClaudeCodeProvider(str(fake), env=agent_cli_env())
    costly = await provider.run(request("a COST of infinity"))
    assert costly.stop_reason == "error" and costly.error_kind == "invalid_answer"
    assert "total_cost_usd=inf" in (costly.error or "")
    many = await provider.run(request("TOKENS past any bound"))  # the engine bounds these
    assert many.usage is not None and many.usage.input_tokens == 10**400
    script = "return [await agent('TOKENS'), await agent('COST'), await agent('plain')];"
    async with QuickJSEngine(EngineConfig(), provider=provider) as engine:
        run = engine.start(WorkflowStartRequest(meta={"name": "n", "description": "d"},
                                                script=script))
        with anyio.fail_after(60):
            result = await run.result()
    assert result.stop_reason == "completed" and result.value == [None, None, "hi"]
    assert result.agents_failed == 2 and result.usage.cost_usd == pytest.approx(0.01)

"""The agent command-line presets (docs/providers.md): ClaudeCodeProvider and CodexProvider
against executables on PATH that reproduce each CLI's documented JSON output and record the
flags, stdin and folder they were given; the engine's agent definitions and worktree isolation
reach them; the CLI's --provider claude|codex runs them in real processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import genai_prices
import pytest

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
REPO = Path(__file__).resolve().parents[2]
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
    (call,) = calls(logs["claude"])
    assert call["stdin"] == "hello there"
    assert call["argv"] == ["-p", "--output-format", "json", "--model", "claude-sonnet-4-5",
                            "--effort", "max", "--append-system-prompt",
                            'You review code.\nBe "terse".', "--allowedTools", "Read,Grep"]


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
    assert first["argv"] == ["-p", "--output-format", "json", "--model", "haiku",
                             "--permission-mode", "acceptEdits"]
    assert second["argv"] == ["-p", "--output-format", "json", "--permission-mode",
                              "acceptEdits"]  # no model, effort or definition: no flag
    assert third["stdin"].startswith("give JSON") and json.dumps(SCHEMA) in third["stdin"]


@pytest.mark.anyio
async def test_codex_gets_its_flags_and_its_usage_is_priced_from_the_model(
        logs: dict[str, Path]) -> None:
    provider = CodexProvider(model="gpt-4o", env=fake_env(logs))
    result = await provider.run(request(effort="max", agent=REVIEWER))
    assert result.stop_reason == "completed"
    assert result.text == "codex says: hello there"  # the last agent_message
    expected = genai_prices.calc_price(
        genai_prices.Usage(input_tokens=2345, output_tokens=678, cache_read_tokens=1200),
        model_ref="gpt-4o").total_price
    assert result.usage is not None
    assert (result.usage.input_tokens, result.usage.output_tokens,
            result.usage.cache_read_tokens) == (2345, 678, 1200)
    assert result.usage.cost_usd == pytest.approx(float(expected))
    (call,) = calls(logs["codex"])
    assert call["stdin"] == "hello there"
    assert call["argv"] == ["exec", "--json", "--skip-git-repo-check", "-m", "gpt-4o",
                            "-c", 'model_reasoning_effort="xhigh"',
                            "-c", 'developer_instructions="You review code.\\nBe \\"terse\\"."',
                            "--sandbox", "read-only", "-"]


@pytest.mark.anyio
async def test_codex_failures_schemas_and_an_unknown_model(logs: dict[str, Path]) -> None:
    provider = CodexProvider(env=fake_env(logs))
    failed = await provider.run(request("FAIL now"))
    assert failed.stop_reason == "error" and "the model is overloaded" in (failed.error or "")
    typed = await provider.run(request("JSON please", schema=SCHEMA, agent=WRITER,
                                       effort="low"))
    assert typed.structured == {"n": 7}
    assert typed.usage is not None and typed.usage.cost_usd is None  # no model: no price
    _, second = calls(logs["codex"])
    assert second["argv"] == ["exec", "--json", "--skip-git-repo-check",
                              "-c", 'model_reasoning_effort="low"',
                              "-c", 'developer_instructions="You write."',
                              "--sandbox", "workspace-write", "-"]


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
    assert "gpt-4o" in isolated["argv"] and "You review code." in " ".join(isolated["argv"])
    assert not any("You review" in arg for arg in shared["argv"])


def cli(*argv: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items()
            if not k.startswith(("OPENAI_", "DSH_WORKFLOW_")) and k not in ("COLUMNS",)}
    full.update(env)
    full["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), full.get("PYTHONPATH")]))
    full["TERM"] = "dumb"
    full["DSH_WORKFLOW_STORE"] = str(cwd / "runs.sqlite3")
    return subprocess.run([sys.executable, "-m", "dsh_workflow", *argv], cwd=cwd, env=full,
                          capture_output=True, text=True, encoding="utf-8", timeout=120)


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
    assert calls(logs["claude"])[0]["argv"][:5] == ["-p", "--output-format", "json", "--model",
                                                    "sonnet"]
    listed = json.loads(cli("runs", "--json", cwd=tmp_path, env=env).stdout)
    assert listed[0]["cost_usd"] == pytest.approx(0.0432)
    done = cli("run", "wf.js", "--provider", "codex", "--model", "gpt-4o", cwd=tmp_path, env=env)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == "codex says: summarize the repo"
    assert calls(logs["codex"])[0]["argv"][3:7] == ["-m", "gpt-4o", "-c",
                                                    'model_reasoning_effort="medium"']


@pytest.mark.anyio
async def test_xhigh_effort_reaches_both_clis_as_their_own_level(logs: dict[str, Path]) -> None:
    """Claude Code's ``xhigh`` level (SPEC §26): both CLIs have it, so it is passed as it is."""
    claude = await ClaudeCodeProvider(env=fake_env(logs)).run(request(effort="xhigh"))
    codex = await CodexProvider(env=fake_env(logs)).run(request(effort="xhigh"))
    assert claude.stop_reason == codex.stop_reason == "completed"
    (claude_call,) = calls(logs["claude"])
    (codex_call,) = calls(logs["codex"])
    assert claude_call["argv"][-2:] == ["--effort", "xhigh"]
    assert 'model_reasoning_effort="xhigh"' in codex_call["argv"]

"""The MCP server's parts that need no subprocess: the saved-workflow prompts hook (served
in-process to the SDK's own client), progress messages, and the ``mcp`` command's option
checks."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import pytest
from _support import await_until

pytest.importorskip("mcp")

from mcp import Client

from dsh_workflow import EchoProvider, QuickJSEngine, SavedWorkflow
from dsh_workflow._events import (
    AgentEnded,
    AgentStarted,
    LogEmitted,
    PhaseStarted,
    RunInfo,
    WorkflowEnded,
)
from dsh_workflow._meta import WorkflowMeta
from dsh_workflow.integrations.mcp import (
    ProgressNotifier,
    create_server,
)

pytestmark = pytest.mark.anyio

SAVED = SavedWorkflow(meta=WorkflowMeta(name="triage", description="triage the open issues"),
                      body='return await agent(`triage ${args.repo}`);', path=Path("triage.js"))


class Catalog:
    def workflows(self) -> Sequence[SavedWorkflow]:
        return [SAVED]


def _server(saved: Any = None) -> Any:
    return create_server(lambda provider: QuickJSEngine(provider=provider),
                         lambda call: EchoProvider(), saved_workflows=saved)


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_saved_workflows_are_prompts_that_call_the_tool(anyio_backend: str) -> None:
    async with Client(_server(Catalog()), mode="legacy") as client:
        listed = (await client.list_prompts()).prompts
        assert [(p.name, p.description) for p in listed] == [("triage", "triage the open issues")]
        prompt = await client.get_prompt("triage", {"args": '{"repo": "acme/app"}'})
        text = prompt.messages[0].content.text  # type: ignore[union-attr]  # the prompt's content is text here
        call = json.loads(text[text.index("{"):])
        assert call == {"meta": {"name": "triage", "description": "triage the open issues"},
                        "script": SAVED.body, "args": {"repo": "acme/app"}}
        assert "`workflow` tool" in text
        # The prompt's arguments are exactly what the tool runs.
        result = await client.call_tool("workflow", call)
        assert not result.is_error
        assert result.structured_content["result"] == "echo: triage acme/app"


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_without_saved_workflows_no_prompts_are_offered(anyio_backend: str) -> None:
    async with Client(_server(), mode="legacy") as client:
        assert client.server_capabilities.prompts is None


async def test_progress_is_coalesced_and_ends_with_the_final_state() -> None:
    sent: list[tuple[float, float | None, str]] = []

    async def send(progress: float, total: float | None, message: str) -> None:
        sent.append((progress, total, message))

    run = RunInfo(id="r", meta=WorkflowMeta(name="w", description="d"))
    reporter = ProgressNotifier(send, interval=0.2)
    async with anyio.create_task_group() as tg:
        tg.start_soon(reporter.pump)
        reporter(PhaseStarted(run=run, title="Scan"))
        # the first change goes out at once: well within the interval
        await await_until(lambda: sent, what="the first change to go out", timeout=0.05)
        assert [m for _, _, m in sent] == ["phase: Scan; 0/0 agents done"]
        for seq in range(1, 6):  # a burst inside one interval: coalesced
            reporter(AgentStarted(run=run, seq=seq, label=f"a{seq}"))
            reporter(AgentEnded(run=run, seq=seq, label=f"a{seq}",
                                outcome="failed" if seq == 5 else "completed"))
        reporter(LogEmitted(run=run, message="not progress"))
        reporter(WorkflowEnded(run=run, stop_reason="completed", agents_started=5))
        tg.cancel_scope.cancel()
    await reporter.flush()
    assert [(p, t) for p, t, _ in sent] == [(1.0, None), (2.0, None)]
    assert sent[-1][2] == "phase: Scan; 5/5 agents done (1 failed); workflow completed"
    await reporter.flush()  # nothing new: nothing sent
    assert len(sent) == 2


@pytest.mark.parametrize(("options", "message"), [
    (["--sampling-max-tokens", "10"], "--sampling-max-tokens applies only to --provider sampling"),
    (["--provider", "sampling", "--model", "m"], "--model applies only to --provider openai"),
    (["--http", "0"], "must be between 1 and 65535"),
    (["--provider", "command"], "--provider command needs --command"),
    (["--store", "/proc/no-such-folder/runs.sqlite3"], "cannot create the run store folder"),
])
def test_mcp_option_errors_exit_2_before_serving(options: list[str], message: str) -> None:
    done = subprocess.run([sys.executable, "-m", "dsh_workflow", "mcp", *options],
                          check=False, capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 2
    assert message in done.stderr
    assert done.stdout == ""


def test_without_the_mcp_extra_the_command_says_how_to_get_it() -> None:
    code = ("import sys; sys.modules['mcp'] = None\n"
            "from dsh_workflow._cli.main import main\n"
            "sys.exit(main(['mcp']))")
    done = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True,
                          text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 2, done.stderr
    assert "pip install 'dsh-workflow[mcp]'" in done.stderr
    assert "Traceback" not in done.stderr

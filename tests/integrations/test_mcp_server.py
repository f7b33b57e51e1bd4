"""``dsh-workflow mcp`` as a real subprocess, driven by the official MCP SDK's own client.

Covers docs/mcp.md: the tool listing (name, description and schema are WorkflowTool's), a
successful and a failing call, progress notifications, cancellation (the provider's child is
killed and the server keeps serving), and ``--provider sampling`` answered by a client
callback (text and schema calls, the repair retry, a client without sampling) — on stdio, and
on streamable HTTP at 127.0.0.1. The client runs on trio and on asyncio.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from _support import await_until

mcp = pytest.importorskip("mcp")

from mcp import (  # noqa: E402 - imported once importorskip has found it
    ClientSession,
    StdioServerParameters,
    stdio_client,
    types,
)
from mcp.client.streamable_http import streamable_http_client  # noqa: E402 - likewise

from dsh_workflow import (  # noqa: E402 - after the skip
    AgentRegistry,
    EchoProvider,
    QuickJSEngine,
    WorkflowTool,
)

pytestmark = [
    pytest.mark.anyio,
    # The SDK's HTTP client leaves its response iterators to the garbage collector on trio.
    pytest.mark.filterwarnings("ignore:Async generator 'http:ResourceWarning"),
    pytest.mark.filterwarnings(
        "ignore:Exception ignored in. <async_generator object "
        ":pytest.PytestUnraisableExceptionWarning"),
]

META = {"name": "mcp-test", "description": "a workflow run over MCP"}
FAN_OUT = ('phase("Fan out");\n'
           'const xs = await parallel([1, 2, 3].map(i => () => agent(`item ${i}`)));\n'
           'phase("Sum up");\n'
           'return {xs, n: xs.length};')
SCHEMA = {"type": "object", "properties": {"score": {"type": "integer", "minimum": 1}},
          "required": ["score"]}


def _server_argv(*options: str) -> list[str]:
    return ["-m", "dsh_workflow", "mcp", *options]


Sampler = Callable[..., Any]


@asynccontextmanager
async def stdio_session(*options: str, sampling: Sampler | None = None) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=sys.executable, args=_server_argv(*options),
                                   env=dict(os.environ))
    async with stdio_client(params) as (read, write), \
            ClientSession(read, write, sampling_callback=sampling) as session:
        await session.initialize()
        yield session


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@asynccontextmanager
async def http_server(*options: str, token: str | None = None) -> AsyncIterator[str]:
    """``dsh-workflow mcp --http PORT`` as a child process; yields its URL once it listens.

    Its token is ``token`` (by ``$DSH_WORKFLOW_TOKEN``; default: a random one, see
    :func:`bearer_client` and ``test_mcp_auth.py``)."""
    port = _free_port()
    env = dict(os.environ)
    env["DSH_WORKFLOW_TOKEN"] = token or TOKEN
    # stderr is inherited: the server's log stays visible when a test fails.
    async with await anyio.open_process(
            [sys.executable, *_server_argv(*options, "--http", str(port))],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=None,
            env=env) as process:
        try:
            async def listening() -> bool:
                try:
                    stream = await anyio.connect_tcp("127.0.0.1", port)
                except OSError:
                    assert process.returncode is None, "the server exited"
                    return False
                await stream.aclose()
                return True

            await await_until(listening, what="the server to listen", timeout=30)
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            process.terminate()
            with anyio.CancelScope(shield=True), anyio.fail_after(10):
                await process.wait()


#: The token the HTTP servers of these tests are started with.
TOKEN = secrets.token_urlsafe(32)


def bearer_client(token: str = TOKEN) -> Any:
    """The SDK's own HTTP client, sending ``Authorization: Bearer <token>``."""
    from mcp.shared._httpx_utils import create_mcp_http_client

    return create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})


@asynccontextmanager
async def http_session(*options: str, sampling: Sampler | None = None) -> AsyncIterator[ClientSession]:
    async with http_server(*options) as url, bearer_client() as client, \
            streamable_http_client(url, http_client=client) as (read, write, *_), \
            ClientSession(read, write, sampling_callback=sampling) as session:
        await session.initialize()
        yield session


TRANSPORTS = {"stdio": stdio_session, "http": http_session}


@pytest.fixture(params=sorted(TRANSPORTS))
def connect(request: pytest.FixtureRequest) -> Callable[..., Any]:
    return TRANSPORTS[request.param]


def _text(result: types.CallToolResult) -> str:
    assert len(result.content) == 1
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def _reply(text: str) -> types.CreateMessageResult:
    return types.CreateMessageResult(role="assistant", model="test-model",
                                     content=types.TextContent(type="text", text=text))


async def test_lists_the_workflow_tool_with_the_tools_own_texts(connect: Any) -> None:
    reference = WorkflowTool(QuickJSEngine(provider=EchoProvider(),
                                           agents=AgentRegistry.default()))
    async with connect() as session:
        listed = (await session.list_tools()).tools
    assert [tool.name for tool in listed] == ["workflow", "workflow_result"]
    assert listed[0].description == reference.description
    assert listed[0].input_schema == reference.input_schema
    name, description, schema = reference.result_tool()
    assert (listed[1].name, listed[1].description, listed[1].input_schema) == (
        name, description, schema)


async def test_the_listing_describes_the_provider_the_calls_will_use(connect: Any) -> None:
    """The tool's provider line is the chosen provider's, not the offline one's."""
    async with connect("--provider", "openai", "--model", "listed-model") as session:
        openai_listed = (await session.list_tools()).tools[0].description
    async with connect("--provider", "sampling") as session:
        sampling_listed = (await session.list_tools()).tools[0].description
    assert "model listed-model" in openai_listed and EchoProvider().description not in openai_listed
    assert "the MCP client's own model, through sampling" in sampling_listed
    assert EchoProvider().description not in sampling_listed


async def test_a_call_runs_the_workflow_and_reports_progress(connect: Any) -> None:
    notes: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        notes.append((progress, total, message))

    async with connect("--echo-latency", "0.05") as session:
        result = await session.call_tool("workflow", {"meta": META, "script": FAN_OUT},
                                         progress_callback=on_progress)
    assert not result.is_error
    text = _text(result)
    assert text.startswith('workflow "mcp-test" completed (3 agents).\nReturn value:\n')
    value = json.loads(text.split("Return value:\n", 1)[1])
    assert value == {"xs": ["echo: item 1", "echo: item 2", "echo: item 3"], "n": 3}
    assert result.structured_content is not None
    assert result.structured_content["agents_started"] == 3
    assert notes, "no progress notification arrived"
    progress = [p for p, _, _ in notes]
    assert progress == sorted(set(progress)), "progress must increase with every notification"
    messages = [m or "" for _, _, m in notes]
    assert any("phase: Fan out" in m for m in messages)
    assert messages[-1] == "phase: Sum up; 3/3 agents done; workflow completed"


async def test_no_progress_token_no_notifications_and_failures_are_tool_errors(connect: Any) -> None:
    seen: list[object] = []

    async def on_message(message: object) -> None:
        seen.append(message)

    async with connect() as session:
        session._message_handler = on_message
        failed = await session.call_tool("workflow", {"meta": META,
                                                      "script": "throw new Error('boom')"})
        bad_args = await session.call_tool("workflow", {"meta": {"name": "x"}, "script": "1"})
        unknown = await session.call_tool("nope", {})
    assert failed.is_error and _text(failed).startswith("Error: workflow run failed:")
    assert "boom" in _text(failed)
    assert bad_args.is_error and _text(bad_args).startswith("Error: ")
    assert "description" in _text(bad_args)
    assert unknown.is_error and "'workflow'" in _text(unknown)
    assert not [m for m in seen if isinstance(m, types.ProgressNotification)]


BIG = "return {findings: Array.from({length: 600}, (_, i) => ({i, note: 'n'.repeat(90)}))};"


async def test_a_cut_result_is_read_whole_through_the_result_tool(connect: Any) -> None:
    """SPEC §26: the server's workflow_result reads the rest of a result cut at 50,000
    characters (a store-less server: its last results), page by page and by pointer."""
    async with connect() as session:
        cut = await session.call_tool("workflow", {"meta": META, "script": BIG})
        assert not cut.is_error and cut.structured_content is not None
        run_id = cut.structured_content["run_id"]
        assert (f'read them with workflow_result({{"runId": "{run_id}", "offset": 50000}})'
                in _text(cut))
        pages: list[str] = []
        offset: int | None = 0
        while offset is not None:
            page = await session.call_tool("workflow_result", {"runId": run_id,
                                                               "offset": offset})
            assert not page.is_error and page.structured_content is not None, _text(page)
            pages.append(page.structured_content["text"])
            offset = page.structured_content["next_offset"]
        part = await session.call_tool("workflow_result", {"runId": run_id,
                                                           "pointer": "/findings/599"})
        unknown = await session.call_tool("workflow_result", {"runId": "nope"})
    whole = json.loads("".join(pages))
    assert len(whole["findings"]) == 600 and len(pages) == 2 and len(pages[0]) == 50000
    assert part.structured_content is not None
    assert json.loads(part.structured_content["text"]) == {"i": 599, "note": "n" * 90}
    assert unknown.is_error and "no such run" in _text(unknown)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie waiting for its parent counts as gone
        return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1][0] != "Z"
    except (OSError, IndexError):
        return False


async def test_cancelling_the_call_kills_the_child_and_the_server_keeps_serving(
        connect: Any, tmp_path: Path) -> None:
    pid_file = tmp_path / "child.pid"
    child = (f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); "
             "time.sleep(120)")
    command = f"{sys.executable} -c \"{child}\""
    async with connect("--provider", "command", "--command", command) as session:
        with anyio.CancelScope() as scope:
            async def cancel_once_started() -> None:
                await await_until(lambda: pid_file.exists() and pid_file.read_text(),
                                  what="the child to write its pid", timeout=30)
                scope.cancel()

            async with anyio.create_task_group() as tg:
                tg.start_soon(cancel_once_started)
                await session.call_tool("workflow", {"meta": META,
                                                     "script": 'return await agent("wait")'})
        assert scope.cancelled_caught
        pid = int(pid_file.read_text())
        await await_until(lambda: not _pid_alive(pid), what="the child to end", timeout=15)
        # The server is alive and serving: a call after the cancellation works.
        assert (await session.list_tools()).tools[0].name == "workflow"


async def test_sampling_answers_text_and_schema_calls_through_the_client(connect: Any) -> None:
    asked: list[types.CreateMessageRequestParams] = []

    async def sampling(context: Any, params: types.CreateMessageRequestParams) -> Any:
        asked.append(params)
        content = params.messages[-1].content
        assert isinstance(content, types.TextContent)
        if params.system_prompt and '"score"' in params.system_prompt:
            return _reply('```json\n{"score": 7}\n```')
        return _reply(f"model says: {content.text}")

    script = ('const text = await agent("hello", {label: "greet"});\n'
              f'const rated = await agent("rate it", {{schema: {json.dumps(SCHEMA)}}});\n'
              'return {text, rated};')
    async with connect("--provider", "sampling", sampling=sampling) as session:
        result = await session.call_tool("workflow", {"meta": META, "script": script})
    assert not result.is_error, _text(result)
    assert result.structured_content is not None
    assert result.structured_content["result"] == {"text": "model says: hello",
                                                   "rated": {"score": 7}}
    assert result.structured_content["usage"] == {"input_tokens": 0, "output_tokens": 0}
    assert len(asked) == 2
    assert asked[0].system_prompt is None
    system = asked[1].system_prompt
    assert system is not None and "JSON" in system
    assert json.loads(system[system.index("{"):]) == SCHEMA  # the schema itself, whole


async def test_sampling_repairs_an_invalid_reply_once_then_gives_null(connect: Any) -> None:
    replies = iter(['{"score": 0}', '{"score": 3}',      # repaired on the second try
                    "not json", '{"score": "high"}'])   # still invalid after the repair
    asked: list[types.CreateMessageRequestParams] = []

    async def sampling(context: Any, params: types.CreateMessageRequestParams) -> Any:
        asked.append(params)
        return _reply(next(replies))

    script = (f'const schema = {json.dumps(SCHEMA)};\n'
              'const first = await agent("one", {schema});\n'
              'const second = await agent("two", {schema});\n'
              'return {first, second};')
    async with connect("--provider", "sampling", sampling=sampling) as session:
        result = await session.call_tool("workflow", {"meta": META, "script": script})
    assert not result.is_error, _text(result)
    assert result.structured_content is not None
    assert result.structured_content["result"] == {"first": {"score": 3}, "second": None}
    assert len(asked) == 4
    repair = asked[1].messages
    assert [m.role for m in repair] == ["user", "assistant", "user"]
    last = repair[-1].content
    assert isinstance(last, types.TextContent) and "score" in last.text


async def test_sampling_without_the_clients_capability_is_a_clear_error(connect: Any) -> None:
    async with connect("--provider", "sampling") as session:
        no_agents = await session.call_tool("workflow", {"meta": META, "script": "return 1"})
        result = await session.call_tool("workflow", {"meta": META,
                                                      "script": 'return await agent("x")'})
    assert not no_agents.is_error  # nothing to sample, nothing to refuse
    assert result.is_error
    assert _text(result).startswith("Error: workflow run failed: AGENT_FAILED")
    assert "needs an MCP client that supports sampling" in _text(result)


async def test_cancelling_a_sampled_call_withdraws_the_sampling_request(connect: Any) -> None:
    started = anyio.Event()
    withdrawn = anyio.Event()

    async def sampling(context: Any, params: types.CreateMessageRequestParams) -> Any:
        started.set()
        try:
            await anyio.sleep_forever()
        finally:
            withdrawn.set()
        raise AssertionError("unreachable")

    async with connect("--provider", "sampling", sampling=sampling) as session:
        with anyio.CancelScope() as scope:
            async def cancel_once_started() -> None:
                with anyio.fail_after(30):
                    await started.wait()
                scope.cancel()

            async with anyio.create_task_group() as tg:
                tg.start_soon(cancel_once_started)
                await session.call_tool("workflow", {"meta": META,
                                                     "script": 'return await agent("slow")'})
        with anyio.fail_after(15):
            await withdrawn.wait()
        assert (await session.list_tools()).tools[0].name == "workflow"


async def test_the_readmes_client_configuration_starts_the_server_as_written() -> None:
    repo = Path(__file__).resolve().parents[2]
    manual = "\n".join(page.read_text(encoding="utf-8")  # README.md and docs/: the manual
                        for page in [repo / "README.md", *sorted((repo / "docs").glob("*.md"))])
    blocks = [b.split("```", 1)[0] for b in manual.split("```json\n")[1:]]
    config = next(json.loads(b) for b in blocks if "mcpServers" in b)
    (server,) = config["mcpServers"].values()
    env = dict(os.environ)  # the console script is installed next to this interpreter
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    params = StdioServerParameters(command=server["command"], args=server["args"], env=env)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        assert [t.name for t in (await session.list_tools()).tools] == ["workflow",
                                                                        "workflow_result"]
        result = await session.call_tool("workflow", {"meta": META, "script": FAN_OUT})
    assert not result.is_error, _text(result)


async def test_with_store_every_run_is_recorded(tmp_path: Path) -> None:
    from dsh_workflow import SQLiteRunStore

    path = tmp_path / "private" / "runs.sqlite3"
    async with stdio_session("--store", str(path)) as session:
        result = await session.call_tool("workflow", {"meta": META, "script": FAN_OUT})
    assert not result.is_error and result.structured_content is not None
    assert (path.parent.stat().st_mode & 0o777) == 0o700
    async with SQLiteRunStore(str(path)) as store:
        record = await store.get_run(result.structured_content["run_id"])
    assert record is not None
    assert record.meta["name"] == "mcp-test" and record.status == "completed"


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_client_that_probes_the_newer_protocol_still_gets_sampling(transport: str) -> None:
    """``mcp.Client`` probes the per-request protocol era first; sampling needs the handshake
    era's server-to-client requests, so the server sends it there and sampling works."""
    from mcp import Client

    async def sampling(context: Any, params: types.CreateMessageRequestParams) -> Any:
        return _reply("sampled")

    script = 'return await agent("hello");'
    if transport == "stdio":
        params = StdioServerParameters(command=sys.executable,
                                       args=_server_argv("--provider", "sampling"),
                                       env=dict(os.environ))
        async with Client(params, sampling_callback=sampling) as client:
            result = await client.call_tool("workflow", {"meta": META, "script": script})
    else:
        async with http_server("--provider", "sampling") as url, bearer_client() as http, \
                Client(streamable_http_client(url, http_client=http),
                       sampling_callback=sampling) as client:
            result = await client.call_tool("workflow", {"meta": META, "script": script})
    assert not result.is_error, _text(result)
    assert result.structured_content is not None
    assert result.structured_content["result"] == "sampled"


async def test_saved_workflows_are_prompts_and_workflow_finds_them(tmp_path: Path) -> None:
    folder = tmp_path / "workflows"
    folder.mkdir()
    (folder / "greet.js").write_text(
        "export const meta = { name: 'greet', description: 'say hello' };\n"
        "return await agent('hello ' + (args?.who ?? 'world'));\n", "utf-8")
    async with stdio_session("--workflows", str(folder)) as session:
        prompts = (await session.list_prompts()).prompts
        assert [p.name for p in prompts] == ["greet"]
        prompt = await session.get_prompt("greet", {"args": '{"who": "mcp"}'})
        content = prompt.messages[0].content
        assert isinstance(content, types.TextContent) and '"who": "mcp"' in content.text
        result = await session.call_tool("workflow", {
            "meta": META, "script": "return await workflow('greet', {who: 'nested'});"})
    assert not result.is_error, _text(result)
    assert result.structured_content is not None
    assert result.structured_content["result"] == "echo: hello nested"

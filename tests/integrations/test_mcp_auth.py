"""``dsh-workflow mcp --http``: only clients bearing the server's token reach it (SECURITY.md,
"Local servers: the token").

The server runs as a real child process on 127.0.0.1; the positive path goes through the
official MCP SDK's client, the refusals through plain HTTP requests, and "nothing run" is
checked on the server's own run store.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from _support import wait_while_running

mcp = pytest.importorskip("mcp")

from mcp import ClientSession  # noqa: E402 - imported once importorskip has found it
from mcp.client.streamable_http import streamable_http_client  # noqa: E402 - likewise
from mcp.shared._httpx_utils import create_mcp_http_client  # noqa: E402 - likewise

from dsh_workflow import SQLiteRunStore  # noqa: E402 - after the skip

pytestmark = [
    # The SDK's HTTP client leaves its response iterators to the garbage collector on trio.
    pytest.mark.filterwarnings("ignore:Async generator 'http:ResourceWarning"),
    pytest.mark.filterwarnings(
        "ignore:Exception ignored in. <async_generator object "
        ":pytest.PytestUnraisableExceptionWarning"),
]

TOKEN_ENV = "DSH_WORKFLOW_TOKEN"
META = {"name": "auth-test", "description": "a workflow run over MCP"}
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "auth-test", "version": "1"}}}


@dataclass
class Server:
    url: str
    log: Path
    process: subprocess.Popen[bytes]

    def token(self) -> str:
        """The token the server printed at start."""
        match = re.search(r"Authorization: Bearer (\S+?)'", self.log.read_text())
        assert match is not None, self.log.read_text()
        return match.group(1)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def mcp_server(tmp_path: Path, *options: str, env_token: str | None = None) -> Iterator[Server]:
    """``dsh-workflow mcp --http PORT`` as a child process, its stderr in a file."""
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
    if env_token is not None:
        env[TOKEN_ENV] = env_token
    log = tmp_path / f"server-{port}.log"
    with open(log, "w") as sink:
        process = subprocess.Popen(
            [sys.executable, "-m", "dsh_workflow", "mcp", *options, "--http", str(port)],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=sink, env=env)
    try:
        # the token is printed once it listens
        wait_while_running(process, lambda: "Authorization: Bearer" in log.read_text(),
                           what="the server to start", timeout=30, output=log)
        yield Server(url=f"http://127.0.0.1:{port}/mcp", log=log, process=process)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


async def _stored_runs(store: Path) -> list[Any]:
    async with SQLiteRunStore(str(store)) as opened:
        return list(await opened.list_runs())


def _runs(store: Path) -> list[Any]:
    return anyio.run(_stored_runs, store)


def _call(run_id: int, script: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": run_id, "method": "tools/call",
            "params": {"name": "workflow", "arguments": {"meta": META, "script": script}}}


REFUSED_HEADERS: list[dict[str, str]] = [
    {},
    {"Authorization": "Bearer wrong-token"},
    {"Authorization": "Basic dXNlcjpwYXNz"},
    {"Authorization": "Bearer"},
]


def test_a_request_without_the_token_is_refused_and_runs_nothing(tmp_path: Path) -> None:
    store = tmp_path / "private" / "runs.sqlite3"
    token = "the-right-token-0123456789"
    with mcp_server(tmp_path, "--store", str(store), env_token=token) as server, \
            httpx.Client(timeout=30) as http:
        good = {**ACCEPT, "Authorization": f"Bearer {token}"}
        opened = http.post(server.url, headers=good, json=INITIALIZE)
        assert opened.status_code == 200, opened.text
        session = {"mcp-session-id": opened.headers["mcp-session-id"],
                   "mcp-protocol-version": "2025-06-18"}
        assert http.post(server.url, headers={**good, **session},
                         json={"jsonrpc": "2.0", "method": "notifications/initialized"}
                         ).status_code == 202
        for extra in [*REFUSED_HEADERS, {"Authorization": f"Bearer {token}x"},
                      {"Authorization": f"Bearer {token[:-1]}"}]:
            for message in (INITIALIZE, _call(2, "return 1"),
                            {"jsonrpc": "2.0", "id": 3, "method": "tools/list"}):
                refused = http.post(server.url, headers={**ACCEPT, **session, **extra},
                                    json=message)
                assert refused.status_code == 401, (extra, message, refused.text)
                assert refused.headers["www-authenticate"].startswith("Bearer")
                assert "inputSchema" not in refused.text and "mcp-session-id" not in \
                    refused.headers
            # the session's event stream and its end are refused too
            assert http.get(server.url, headers={**ACCEPT, **session, **extra}
                            ).status_code == 401
            assert http.delete(server.url, headers={**session, **extra}).status_code == 401
        # a token in the query string is not a bearer token
        assert http.post(f"{server.url}?token={token}", headers={**ACCEPT, **session},
                         json=_call(4, "return 1")).status_code == 401
        assert _runs(store) == []  # nothing ran
        # the session the refused DELETEs named is still there: the right token runs
        ran = http.post(server.url, headers={**good, **session}, json=_call(5, "return 41 + 1"))
        assert ran.status_code == 200 and '"result":42' in ran.text, ran.text
    assert [r.status for r in _runs(store)] == ["completed"]


@pytest.mark.anyio
async def test_the_sdk_client_works_with_the_printed_token_only(tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite3"
    with mcp_server(tmp_path, "--store", str(store)) as server:
        token = server.token()
        assert len(token) >= 40  # secrets.token_urlsafe(32)
        for wrong in (None, "not-" + token):
            headers = None if wrong is None else {"Authorization": f"Bearer {wrong}"}
            # the SDK reports the 401 as an error response of the initialize request
            with pytest.raises(Exception):  # noqa: B017 - wrapped in exception groups
                with anyio.fail_after(30):
                    async with create_mcp_http_client(headers=headers) as http, \
                            streamable_http_client(server.url, http_client=http) as streams, \
                            ClientSession(streams[0], streams[1]) as session:
                        await session.initialize()
                        await session.call_tool("workflow", {"meta": META, "script": "return 1"})
        async with create_mcp_http_client(headers={"Authorization": f"Bearer {token}"}) as http, \
                streamable_http_client(server.url, http_client=http) as streams, \
                ClientSession(streams[0], streams[1]) as session:
            await session.initialize()
            assert [t.name for t in (await session.list_tools()).tools] == [
                "workflow", "workflow_result", "workflow_answer"]  # a server with a store
            result = await session.call_tool("workflow", {"meta": META, "script": "return 7"})
            assert not result.is_error and result.structured_content is not None
            assert result.structured_content["result"] == 7
    assert len(await _stored_runs(store)) == 1  # only the call that bore the token ran


def test_each_start_makes_a_new_token(tmp_path: Path) -> None:
    tokens = []
    for _ in range(2):
        with mcp_server(tmp_path) as server:
            tokens.append(server.token())
            bearer = {**ACCEPT, "Authorization": f"Bearer {tokens[-1]}"}
            assert httpx.post(server.url, headers=bearer, json=INITIALIZE,
                              timeout=30).status_code == 200
    assert tokens[0] != tokens[1]


@pytest.mark.parametrize("how", ["option", "environment", "option over environment"])
def test_the_token_comes_from_the_option_or_the_environment(tmp_path: Path, how: str) -> None:
    chosen = "chosen-token-Zx9"
    options = ("--token", chosen) if how.startswith("option") else ()
    env_token = {"option": None, "environment": chosen,
                 "option over environment": "the-other-token"}[how]
    with mcp_server(tmp_path, *options, env_token=env_token) as server, \
            httpx.Client(timeout=30) as http:
        assert server.token() == chosen
        assert http.post(server.url, headers={**ACCEPT, "Authorization": f"Bearer {chosen}"},
                         json=INITIALIZE).status_code == 200
        if env_token is not None and env_token != chosen:
            assert http.post(server.url, json=INITIALIZE, headers={
                **ACCEPT, "Authorization": f"Bearer {env_token}"}).status_code == 401


@pytest.mark.parametrize(("options", "env_token", "message"), [
    (("--token", "", "--http", "1"), None, "--token is empty"),
    (("--token", "has space", "--http", "1"), None, "--token may hold only visible ASCII"),
    (("--token", "x" * 513, "--http", "1"), None, "longer than 512"),
    (("--http", "1"), "tab\there", f"${TOKEN_ENV} may hold only visible ASCII"),
    (("--token", "secret-value"), None, "--token applies only to --http"),
])
def test_an_unusable_token_is_a_start_error(options: tuple[str, ...], env_token: str | None,
                                            message: str) -> None:
    env = {k: v for k, v in os.environ.items() if k != TOKEN_ENV}
    if env_token is not None:
        env[TOKEN_ENV] = env_token
    done = subprocess.run([sys.executable, "-m", "dsh_workflow", "mcp", *options],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env,
                          timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr
    assert "secret-value" not in done.stderr and "has space" not in done.stderr


def test_a_busy_port_is_a_start_error_that_prints_no_token() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = subprocess.run([sys.executable, "-m", "dsh_workflow", "mcp", "--http", str(port)],
                              stdin=subprocess.DEVNULL, capture_output=True, text=True,
                              timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    assert f"cannot listen on 127.0.0.1:{port}" in done.stderr
    assert "Bearer" not in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("how", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_server_stopped_the_moment_it_prints_its_token_ends(tmp_path: Path, how: int) -> None:
    """The address and token are printed once the server serves with its signal handlers in
    place: a signal sent the moment they are read ends the process at once, every time."""
    for _ in range(3):
        with mcp_server(tmp_path) as server:
            process = server.process
            started = time.monotonic()
            process.send_signal(how)
            process.wait(timeout=10)
            assert time.monotonic() - started < 10, server.log.read_text()
            # Ctrl-C is an interrupted command (130); SIGTERM ends it as the signal does.
            expected = 130 if how == signal.SIGINT else -signal.SIGTERM
            assert process.returncode == expected, server.log.read_text()

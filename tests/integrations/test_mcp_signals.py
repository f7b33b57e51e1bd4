"""Signals end what the MCP server started (SPEC §24): ``dsh-workflow mcp`` on SIGTERM or
SIGHUP (stdio) and on SIGHUP or SIGTERM (HTTP) cancels every call in flight — its command children
killed, its worktrees removed — before the process exits. Real processes, a real git
repository, the protocol spoken as raw JSON-RPC."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _support import alive, wait_while_running, written_files

pytest.importorskip("mcp")
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

REPO = Path(__file__).resolve().parents[2]
META = {"name": "mcp-signals", "description": "a call stopped by a signal"}
AGENT = """\
import os, pathlib, sys, time
folder = pathlib.Path(sys.argv[1])
(folder / str(os.getpid())).write_text(os.getcwd())
time.sleep(120)
"""
SCRIPT = ("return await parallel([() => agent('a', { isolation: 'worktree' }), "
          "() => agent('b', { isolation: 'worktree' })]);")
PROTOCOL = "2025-06-18"
INIT = {"protocolVersion": PROTOCOL, "capabilities": {},
        "clientInfo": {"name": "signal-test", "version": "1"}}
TOKEN = "signal-test-token"


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.name", "dev")
    git(repo, "config", "user.email", "dev@localhost")
    (repo / "tracked.txt").write_text("committed\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "first")
    return repo


def server_env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "DSH_WORKFLOW_"))}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["TMPDIR"] = str(tmp)  # where the worktrees are made
    env["DSH_WORKFLOW_TOKEN"] = TOKEN
    return env


def agent_command(tmp: Path) -> tuple[str, Path]:
    pids = tmp / "pids"
    pids.mkdir()
    agent = tmp / "agent.py"
    agent.write_text(AGENT, encoding="utf-8")
    return f"{sys.executable} {agent} {pids}", pids


def wait_children(pids: Path, server: subprocess.Popen[bytes], count: int = 2) -> list[int]:
    """The pids of ``count`` agents once each wrote its working directory into ``pids`` (a
    file named by its pid); fails at once if ``server`` exits first."""
    wait_while_running(server, lambda: len(written_files(pids)) >= count,
                       what="the children to start", timeout=60)
    return [int(p.name) for p in pids.iterdir()]


def assert_everything_ended(server: subprocess.Popen[bytes], pids: Path, children: list[int],
                            repo: Path, how: signal.Signals) -> None:
    """The server exited as the signal does, and by then no child ran and no worktree was
    left (checked right after the exit: nothing is waited for afterwards)."""
    server.wait(timeout=60)
    left = [pid for pid in children if alive(pid)]
    assert server.returncode == -how, server.returncode
    assert left == [], "command children outlived the server"
    worktrees = [Path((pids / str(pid)).read_text()) for pid in children]
    assert all(w != repo for w in worktrees), worktrees
    assert [w for w in worktrees if w.exists()] == [], "worktrees were left behind"


def cleanup(server: subprocess.Popen[bytes], pids: Path) -> None:
    server.kill()
    server.wait()
    for pipe in (server.stdin, server.stdout):
        if pipe is not None:
            pipe.close()
    for entry in pids.iterdir():
        with contextlib.suppress(OSError):
            os.kill(int(entry.name), signal.SIGKILL)


def send(stream: Any, message: dict[str, Any]) -> None:
    stream.write((json.dumps(message) + "\n").encode())
    stream.flush()


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_a_signal_to_the_stdio_server_ends_its_calls_first(tmp_path: Path, repo: Path,
                                                            how: signal.Signals) -> None:
    command, pids = agent_command(tmp_path)
    server = subprocess.Popen(
        [sys.executable, "-m", "dsh_workflow", "mcp", "--provider", "command", "--command",
         command], cwd=repo, env=server_env(tmp_path), stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        assert server.stdin is not None and server.stdout is not None
        send(server.stdin, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": INIT})
        assert json.loads(server.stdout.readline())["id"] == 1
        send(server.stdin, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        send(server.stdin, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "workflow", "arguments": {"meta": META, "script": SCRIPT}}})
        children = wait_children(pids, server)
        server.send_signal(how)  # stdin stays open: the client is still there
        assert_everything_ended(server, pids, children, repo, how)
    finally:
        cleanup(server, pids)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _post(url: str, message: dict[str, Any], session: str | None) -> tuple[str | None, bytes]:
    headers = {"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json",
               "Accept": "application/json, text/event-stream",
               "MCP-Protocol-Version": PROTOCOL}
    if session is not None:
        headers["Mcp-Session-Id"] = session
    request = urllib.request.Request(url, data=json.dumps(message).encode(), headers=headers)
    with urllib.request.urlopen(request, timeout=120) as response:
        return response.headers.get("Mcp-Session-Id"), response.read()


@contextlib.contextmanager
def http_server(tmp_path: Path, repo: Path, command: str) -> Iterator[tuple[
        subprocess.Popen[bytes], str]]:
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, "-m", "dsh_workflow", "mcp", "--provider", "command", "--command",
         command, "--http", str(port)], cwd=repo, env=server_env(tmp_path),
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    def listening() -> bool:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        except OSError:
            return False
        return True

    wait_while_running(server, listening, what="the server to listen", timeout=60)
    yield server, f"http://127.0.0.1:{port}/mcp"


@pytest.mark.parametrize("how", [signal.SIGHUP, signal.SIGTERM], ids=["SIGHUP", "SIGTERM"])
def test_a_signal_to_the_http_server_ends_its_calls_first(tmp_path: Path, repo: Path,
                                                          how: signal.Signals) -> None:
    """SIGHUP is the server's own to handle; SIGTERM is uvicorn's, whose graceful shutdown
    would wait for the call's connection: either way the calls end first."""
    command, pids = agent_command(tmp_path)
    with http_server(tmp_path, repo, command) as (server, url):
        try:
            session, _ = _post(url, {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                                     "params": INIT}, None)
            _post(url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
            answers: list[bytes] = []

            def call() -> None:
                with contextlib.suppress(OSError):
                    answers.append(_post(url, {
                        "jsonrpc": "2.0", "id": 2, "method": "tools/call",
                        "params": {"name": "workflow",
                                   "arguments": {"meta": META, "script": SCRIPT}}}, session)[1])

            caller = threading.Thread(target=call, daemon=True)
            caller.start()
            children = wait_children(pids, server)
            server.send_signal(how)
            assert_everything_ended(server, pids, children, repo, how)
            caller.join(timeout=30)
            assert answers and b"stopping" in answers[0], answers
        finally:
            cleanup(server, pids)

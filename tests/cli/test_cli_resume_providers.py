"""Resume never pays twice, for every built-in provider and preset, and never trusts a provider
record this user did not write (docs/providers.md, "The provider contract"; docs/durable-runs.md).

Real processes throughout: ``dsh-workflow run`` fails after two completed calls, then
``dsh-workflow resume RUN_ID`` with no provider options answers both from the journal (the
backend's call counter does not move for them) and runs the third live on the recorded
provider — the recorded model, base URL or command. The backends are real: a local HTTP server
on 127.0.0.1 for ``openai``, a Python program for ``command``, and the fake ``claude`` and
``codex`` CLIs on PATH (``tests/providers/fake_clis/``), each counting its calls in a file.
The attack tests edit the store's row with ``sqlite3`` and check that ``resume`` neither
contacts the recorded URL nor runs the recorded command.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from _support import REPO, cli_command, cli_env, run_cli, wait_while_running

FAKES = REPO / "tests" / "providers" / "fake_clis"
API_KEY = "sk-test-resume-0123456789abcdef"
SCRIPT = """export const meta = { name: 'paid', description: 'two paid calls, then a stop' };
const a = await agent('one');
const b = await agent('two');
if (!args.ok) throw new Error('stopped after two calls');
const c = await agent('three');
return [a, b, c];
"""


def env_for(tmp_path: Path, **extra: str) -> dict[str, str]:
    """No agent CLI's own settings; this user's store and record key live under ``tmp_path``."""
    names = {"NO_PROXY": "127.0.0.1", "XDG_CONFIG_HOME": str(tmp_path / "config"), **extra}
    return {**cli_env(store=tmp_path / "runs.sqlite3", drop_prefixes=("CLAUDE_", "CODEX_", "XDG_")),
            **names}


def cli(tmp_path: Path, *argv: str, **extra: str) -> subprocess.CompletedProcess[str]:
    return run_cli(*argv, cwd=tmp_path, env=env_for(tmp_path, **extra))


def only_run_id(tmp_path: Path) -> str:
    with sqlite3.connect(tmp_path / "runs.sqlite3") as conn:
        (run_id,), = conn.execute("SELECT id FROM runs WHERE resumed_from IS NULL").fetchall()
    return str(run_id)


def stored_provider(tmp_path: Path, run_id: str) -> dict[str, Any]:
    with sqlite3.connect(tmp_path / "runs.sqlite3") as conn:
        (text,), = conn.execute("SELECT provider FROM runs WHERE id = ?", (run_id,)).fetchall()
    found: dict[str, Any] = json.loads(text)
    return found


def edit_provider(tmp_path: Path, run_id: str, record: dict[str, Any]) -> None:
    with sqlite3.connect(tmp_path / "runs.sqlite3") as conn:
        conn.execute("UPDATE runs SET provider = ? WHERE id = ?", (json.dumps(record), run_id))


def first_run(tmp_path: Path, *provider: str, **extra: str) -> str:
    """The run that completes two calls and then fails; its run id."""
    (tmp_path / "wf.js").write_text(SCRIPT, encoding="utf-8")
    done = cli(tmp_path, "run", "wf.js", "--args", '{"ok": false}', *provider, **extra)
    assert done.returncode == 1, done.stderr
    assert "stopped after two calls" in done.stderr
    return only_run_id(tmp_path)


def resume(tmp_path: Path, run_id: str, *options: str,
           **extra: str) -> subprocess.CompletedProcess[str]:
    return cli(tmp_path, "resume", run_id, "--args", '{"ok": true}', "--json", *options, **extra)


def assert_replayed_two(done: subprocess.CompletedProcess[str]) -> list[Any]:
    assert done.returncode == 0, done.stderr
    assert "warning:" not in done.stderr, done.stderr
    assert "[agent 1 replayed]" in done.stderr and "[agent 2 replayed]" in done.stderr
    assert "[agent 3 started]" in done.stderr
    value: list[Any] = json.loads(done.stdout)["value"]  # --json: the whole result
    return value


# -- a counting OpenAI-compatible server --------------------------------------------------------------


@dataclass
class Server:
    url: str
    requests: list[dict[str, Any]] = field(default_factory=list)


@pytest.fixture
def serve() -> Iterator[Callable[[], Server]]:
    """Starts a local OpenAI-compatible server per call; each records every request it gets
    (its JSON body and Authorization header)."""
    started: list[ThreadingHTTPServer] = []

    def start() -> Server:
        record = Server(url="")

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                record.requests.append({"body": body,
                                        "authorization": self.headers.get("Authorization")})
                prompt = body["messages"][-1]["content"]
                reply = json.dumps({
                    "id": "c-1", "object": "chat.completion", "model": body["model"],
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": "said " + prompt}}],
                    "usage": {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8},
                }).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

        httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        record.url = f"http://127.0.0.1:{httpd.server_address[1]}/v1"
        started.append(httpd)
        return record

    yield start
    for httpd in started:
        httpd.shutdown()
        httpd.server_close()


# -- resume never pays twice -----------------------------------------------------------------------


def test_echo_resume_replays_on_the_recorded_latency(tmp_path: Path) -> None:
    run_id = first_run(tmp_path, "--echo-latency", "0.01")
    assert stored_provider(tmp_path, run_id)["latency_s"] == 0.01
    value = assert_replayed_two(resume(tmp_path, run_id))
    assert value == ["echo: one", "echo: two", "echo: three"]


def test_openai_resume_replays_and_uses_the_recorded_endpoint_and_model(
        tmp_path: Path, serve: Callable[[], Server]) -> None:
    server = serve()
    run_id = first_run(tmp_path, "--provider", "openai", "--base-url", server.url, "--model",
                       "recorded-model", OPENAI_API_KEY=API_KEY)
    assert len(server.requests) == 2
    value = assert_replayed_two(resume(tmp_path, run_id, OPENAI_API_KEY=API_KEY))
    assert value == ["said one", "said two", "said three"]
    assert len(server.requests) == 3  # only the third call was paid for
    assert server.requests[2]["body"]["model"] == "recorded-model"
    assert server.requests[2]["authorization"] == f"Bearer {API_KEY}"
    assert API_KEY.encode() not in (tmp_path / "runs.sqlite3").read_bytes()


def counting_command(tmp_path: Path) -> tuple[str, Path]:
    calls = tmp_path / "command-calls.log"
    agent = tmp_path / "agent.py"
    agent.write_text("import sys\n"
                     "prompt = sys.stdin.read()\n"
                     f"open({str(calls)!r}, 'a').write(repr(sys.argv[1:]) + ' ' + prompt + '\\n')\n"
                     "print('did ' + prompt, end='')\n", encoding="utf-8")
    return f"{sys.executable} {agent}", calls


def test_command_resume_replays_and_runs_the_recorded_command(tmp_path: Path) -> None:
    command, calls = counting_command(tmp_path)
    run_id = first_run(tmp_path, "--provider", "command", "--command", command + " --flavour x")
    assert len(calls.read_text().splitlines()) == 2
    value = assert_replayed_two(resume(tmp_path, run_id))
    assert value == ["did one", "did two", "did three"]
    lines = calls.read_text().splitlines()
    assert len(lines) == 3 and lines[2] == "['--flavour', 'x'] three"


@pytest.mark.parametrize(("preset", "model", "model_flag"), [
    ("claude", "sonnet", "--model=sonnet"),
    ("codex", "gpt-5-codex", "--model=gpt-5-codex"),
])
def test_preset_resume_replays_and_keeps_the_recorded_model(
        tmp_path: Path, preset: str, model: str, model_flag: str) -> None:
    log = tmp_path / f"{preset}.log"
    extra = {"PATH": f"{FAKES}{os.pathsep}{os.environ['PATH']}",
             f"{preset.upper()}_FAKE_LOG": str(log)}
    run_id = first_run(tmp_path, "--provider", preset, "--model", model, **extra)
    assert len(log.read_text().splitlines()) == 2
    value = assert_replayed_two(resume(tmp_path, run_id, **extra))
    assert value == [f"{preset} says: one", f"{preset} says: two", f"{preset} says: three"]
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(calls) == 3  # the two completed calls were not paid for again
    assert model_flag in calls[2]["argv"] and calls[2]["stdin"] == "three"


def test_a_preset_with_extra_arguments_resumes_with_them(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shutil.copy(FAKES / "claude", bin_dir / "my-claude")
    log = tmp_path / "claude.log"
    extra = {"CLAUDE_FAKE_LOG": str(log)}
    command = f"{bin_dir / 'my-claude'} --permission-mode acceptEdits"
    run_id = first_run(tmp_path, "--provider", "claude", "--command", command, **extra)
    assert_replayed_two(resume(tmp_path, run_id, **extra))
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(calls) == 3 and calls[2]["argv"][-2:] == ["--permission-mode", "acceptEdits"]


def test_an_interrupted_claude_run_resumes_without_paying_again(tmp_path: Path) -> None:
    """Ctrl-C while the third call runs: the run ends cancelled (its claude child killed), and
    the resume replays the two completed calls and runs the third on the recorded model."""
    import signal

    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    slow = bin_dir / "claude"
    gate = tmp_path / "let-three-finish"
    waiting = tmp_path / "three-is-waiting"
    # the fake claude, except that "three" says it has its prompt, then waits until the gate
    # file exists
    slow.write_text((FAKES / "claude").read_text(encoding="utf-8").replace(
        "prompt = sys.stdin.read()\n",
        "prompt = sys.stdin.read()\n"
        "import time\n"
        f"if prompt.startswith('three'): open({str(waiting)!r}, 'w').close()\n"
        f"while prompt.startswith('three') and not os.path.exists({str(gate)!r}):\n"
        "    time.sleep(0.05)\n", 1), encoding="utf-8")
    slow.chmod(0o755)
    log = tmp_path / "claude.log"
    extra = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "CLAUDE_FAKE_LOG": str(log)}
    (tmp_path / "wf.js").write_text(SCRIPT, encoding="utf-8")
    with open(tmp_path / "run.err", "wb") as err:
        process = subprocess.Popen(
            cli_command("run", "wf.js", "--args", '{"ok": true}',
             "--provider", "claude", "--model", "opus"), cwd=tmp_path,
            env=env_for(tmp_path, **extra), stdout=subprocess.DEVNULL, stderr=err)
    try:
        # the third child holds its prompt: a signal before that would close its stdin empty
        wait_while_running(process, waiting.exists, what="the third call to wait",
                           timeout=60, output=tmp_path / "run.err")
        process.send_signal(signal.SIGINT)
        assert process.wait(timeout=30) == 130
    finally:
        process.kill()
    assert len(log.read_text().splitlines()) == 2  # the third never logged: it was waiting
    gate.touch()
    run_id = only_run_id(tmp_path)
    value = assert_replayed_two(resume(tmp_path, run_id, **extra))
    assert value == ["claude says: one", "claude says: two", "claude says: three"]
    calls = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(calls) == 3 and "--model=opus" in calls[2]["argv"]


ROUTED = """const a = await agent('one', {provider: 'tool'});
const b = await agent('two');
if (!args.ok) throw new Error('stopped after two calls');
const c = await agent('three', {provider: 'tool'});
return [a, b, c];
"""


def test_a_routing_run_resumes_route_by_route(tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """A routing provider (made in Python; the command line offers none) is rebuilt from its
    record, each route through the CLI's table."""
    import anyio

    from dsh_workflow import (
        CommandProvider,
        EchoProvider,
        EngineConfig,
        QuickJSEngine,
        RoutingProvider,
        SQLiteRunStore,
        WorkflowStartRequest,
    )

    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))  # the CLI's key, too
    command, calls = counting_command(tmp_path)
    routing = RoutingProvider({"fast": EchoProvider(latency_s=0.01),
                               "tool": CommandProvider([sys.executable, command.split()[-1]])},
                              default="fast")

    async def first() -> str:
        async with SQLiteRunStore(tmp_path / "runs.sqlite3") as store:
            async with QuickJSEngine(EngineConfig(), provider=routing, store=store) as engine:
                run = engine.start(WorkflowStartRequest(
                    meta={"name": "routed", "description": "two routes"}, script=ROUTED,
                    args={"ok": False}))
                result = await run.result()
                await run.dispose()
        assert result.error_code is not None and "stopped" in (result.error or "")
        return run.id

    run_id = anyio.run(first)
    assert len(calls.read_text().splitlines()) == 1
    value = assert_replayed_two(resume(tmp_path, run_id))
    assert value == ["did one", "echo: two", "did three"]
    assert len(calls.read_text().splitlines()) == 2  # only the third call ran


# -- secrets in the recorded command ---------------------------------------------------------------


def test_a_command_secret_is_neither_recorded_nor_printed_and_must_be_given_again(
        tmp_path: Path) -> None:
    command, calls = counting_command(tmp_path)
    secret = "hunter2-very-secret"
    run_id = first_run(tmp_path, "--provider", "command", "--command",
                       f"{command} --api-key {secret}")
    record = stored_provider(tmp_path, run_id)
    assert secret not in json.dumps(record) and "[REDACTED]" in json.dumps(record)
    for name in ("runs.sqlite3", "runs.sqlite3-wal"):
        if (tmp_path / name).exists():
            assert secret.encode() not in (tmp_path / name).read_bytes()
    done = resume(tmp_path, run_id)
    assert done.returncode == 2, done.stderr
    assert "give --command again" in done.stderr and secret not in done.stderr
    assert len(calls.read_text().splitlines()) == 2
    again = resume(tmp_path, run_id, "--command", f"{command} --api-key {secret}")
    assert_replayed_two(again)  # the same command (and identity): both calls replay
    assert secret not in again.stderr


def test_the_printed_resume_hint_never_carries_a_command_secret(tmp_path: Path) -> None:
    secret = "hunter2-very-secret"
    agent = tmp_path / "paid.py"
    agent.write_text("import sys\n"
                     "prompt = sys.stdin.read()\n"
                     "sys.stderr.write('dsh-workflow-usage: {\"input_tokens\": 60, "
                     "\"output_tokens\": 40}\\n')\n"
                     "print('did ' + prompt, end='')\n", encoding="utf-8")
    (tmp_path / "wf.js").write_text(SCRIPT, encoding="utf-8")
    done = cli(tmp_path, "run", "wf.js", "--args", '{"ok": true}', "--budget", "150",
               "--provider", "command", "--command",
               f"{sys.executable} {agent} --api-key {secret}")
    assert done.returncode == 1 and "BUDGET_EXCEEDED" in done.stdout, done.stderr
    (hint,) = [line for line in done.stderr.splitlines() if "resume with:" in line]
    assert secret not in done.stderr and "--command" not in hint
    assert "--provider command" in hint


# -- a record this user did not write --------------------------------------------------------------


def test_an_edited_base_url_is_never_contacted(tmp_path: Path, serve: Callable[[], Server]) -> None:
    honest, attacker = serve(), serve()
    run_id = first_run(tmp_path, "--provider", "openai", "--base-url", honest.url, "--model", "m",
                       OPENAI_API_KEY=API_KEY)
    record = stored_provider(tmp_path, run_id)
    record["base_url"] = attacker.url
    edit_provider(tmp_path, run_id, record)
    done = resume(tmp_path, run_id, OPENAI_API_KEY=API_KEY)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.splitlines()
    assert attacker.url in line and "not signed by this user's key" in line
    assert "--provider openai" in line
    assert attacker.requests == [] and len(honest.requests) == 2
    # explicit options: the resume runs on them alone, the record is shown and not used
    done = resume(tmp_path, run_id, "--provider", "openai", "--base-url", honest.url,
                  "--model", "m", OPENAI_API_KEY=API_KEY)
    assert done.returncode == 0, done.stderr
    assert "warning:" in done.stderr and attacker.url in done.stderr
    assert attacker.requests == []


def test_an_edited_command_never_runs(tmp_path: Path) -> None:
    command, calls = counting_command(tmp_path)
    run_id = first_run(tmp_path, "--provider", "command", "--command", command)
    touched = tmp_path / "pwned"
    record = stored_provider(tmp_path, run_id)
    record["command"] = ["touch", str(touched)]
    edit_provider(tmp_path, run_id, record)
    done = resume(tmp_path, run_id)
    assert done.returncode == 2, done.stderr
    assert "touch" in done.stderr and "--provider command" in done.stderr
    assert not touched.exists()
    done = resume(tmp_path, run_id, "--provider", "echo")
    assert done.returncode == 0, done.stderr
    assert not touched.exists() and len(calls.read_text().splitlines()) == 2


@pytest.mark.parametrize("how", ["unsigned", "another user's key", "another run's record"])
def test_a_record_that_does_not_verify_is_refused(tmp_path: Path, how: str) -> None:
    command, calls = counting_command(tmp_path)
    run_id = first_run(tmp_path, "--provider", "command", "--command", command)
    extra: dict[str, str] = {}
    if how == "unsigned":
        record = stored_provider(tmp_path, run_id)
        del record["signature"]
        edit_provider(tmp_path, run_id, record)
    elif how == "another user's key":
        extra["XDG_CONFIG_HOME"] = str(tmp_path / "someone-else")
    else:  # a second run's (validly signed) record copied onto the first
        other = tmp_path / "other"
        other.mkdir()
        (other / "wf.js").write_text(SCRIPT, encoding="utf-8")
        cli(tmp_path, "run", str(other / "wf.js"), "--args", '{"ok": true}', "--provider",
            "command", "--command", command)
        with sqlite3.connect(tmp_path / "runs.sqlite3") as conn:
            (text,), = conn.execute("SELECT provider FROM runs WHERE id != ?",
                                    (run_id,)).fetchall()
        edit_provider(tmp_path, run_id, json.loads(text))
    before = len(calls.read_text().splitlines())
    done = resume(tmp_path, run_id, **extra)
    assert done.returncode == 2, done.stderr
    assert "not signed by this user's key" in done.stderr
    assert len(calls.read_text().splitlines()) == before


def test_the_record_key_is_owner_only(tmp_path: Path) -> None:
    first_run(tmp_path)
    folder = tmp_path / "config" / "dsh-workflow"
    assert folder.stat().st_mode & 0o777 == 0o700
    assert (folder / "record-key").stat().st_mode & 0o777 == 0o600


# -- a preset's executable is looked up at start ---------------------------------------------------


@pytest.mark.parametrize("argv", [
    ["--provider", "claude"],
    ["--provider", "codex"],
    ["--provider", "claude", "--command", "/no/such/claude"],
    ["--provider", "codex", "--command", "not-on-path-codex --flag"],
    ["--provider", "claude", "--command", "NOT_EXECUTABLE"],
])
def test_a_missing_preset_executable_is_refused_before_a_run_is_recorded(
        tmp_path: Path, argv: list[str]) -> None:
    plain = tmp_path / "plain"
    plain.write_text("not a program", encoding="utf-8")
    argv = [str(plain) if arg == "NOT_EXECUTABLE" else arg for arg in argv]
    (tmp_path / "wf.js").write_text(SCRIPT, encoding="utf-8")
    done = cli(tmp_path, "run", "wf.js", *argv, PATH=os.path.dirname(sys.executable))
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.splitlines()
    assert line.startswith("Error: ") and ("not found on PATH" in line or "does not exist" in line
                                           or "is not executable" in line), line
    assert not (tmp_path / "runs.sqlite3").exists()

"""Truthful outcomes on the command line (SPEC §17), run as a real process: a command typo is
one clear line, failed children show their reasons, the final line and the ``warning:`` summary
count them, ``runs``/``show``/``logs`` list them, ``--max-failed-agents`` ends a run."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from _support import cli_env, run_cli

META_HEADER = "export const meta = { name: 'cli-failures', description: 'failed children' };\n"
_STORE_DIR = tempfile.TemporaryDirectory(prefix="dsh-cli-failures-")
STORE = Path(_STORE_DIR.name) / "runs.sqlite3"


def cli(*argv: str | Path, timeout: float = 60, store: Path = STORE,
        extra_env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return run_cli(*argv, env={**cli_env(store=store), **(extra_env or {})}, timeout=timeout)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def test_a_command_typo_is_one_clear_line(tmp_path: Path) -> None:
    script = write(tmp_path, "s.js", META_HEADER + "return await agent('hi')")
    done = cli("run", script, "--provider", "command", "--command", "no-such-agent-cli-xyz --x")
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "Error: --command 'no-such-agent-cli-xyz --x': the command 'no-such-agent-cli-xyz' was "
        "not found on PATH"]
    assert done.stdout == ""


def test_a_command_that_is_not_executable_is_one_clear_line(tmp_path: Path) -> None:
    script = write(tmp_path, "s.js", META_HEADER + "return await agent('hi')")
    agent = write(tmp_path, "agent.sh", "#!/bin/sh\necho hi\n")
    done = cli("run", script, "--provider", "command", "--command", str(agent))
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        f"Error: --command '{agent}': the command '{agent}' is not executable"]


#: A command agent: prompts starting with "bad" fail with a stderr line, others answer.
AGENT = ("import sys; p = sys.stdin.read(); "
         "sys.exit(print('quota exhausted for ' + p[:4], file=sys.stderr) or 3) "
         "if p.startswith('bad') else print('ok ' + p)")
FAILING_SCRIPT = META_HEADER + """
phase('Extract');
return await parallel(['good1', 'bad1', 'good2', 'bad1'].map((p, i) =>
  () => agent(p, { label: 'invoice ' + (i + 1) })));
"""


def _command() -> list[str]:
    return ["--provider", "command", "--command", f"{sys.executable} -c \"{AGENT}\""]


def test_failed_children_show_their_reasons_the_count_and_a_warning(tmp_path: Path) -> None:
    script = write(tmp_path, "s.js", FAILING_SCRIPT)
    done = cli("run", script, *_command())
    assert done.returncode == 0, done.stderr
    lines = done.stderr.splitlines()
    failed = sorted(line for line in lines if " failed]" in line)
    assert failed == [
        "[agent 2 failed] invoice 2 — provider: quota exhausted for bad1 (command exited with "
        "status 3)",
        "[agent 4 failed] invoice 4 — provider: quota exhausted for bad1 (command exited with "
        "status 3)"]
    done_line = next(line for line in lines if line.startswith("[done]"))
    assert done_line.startswith("[done] completed in ") and ", 4 agents, 2 failed, " in done_line
    assert lines[-1] == ("warning: 2 of 4 agents failed — 2 provider: quota exhausted for bad1 "
                         "(command exited with status 3)")


def test_no_warning_and_no_failed_count_without_failures(tmp_path: Path) -> None:
    script = write(tmp_path, "s.js", META_HEADER + "return await agent('good')")
    done = cli("run", script, *_command())
    assert done.returncode == 0
    assert "warning:" not in done.stderr and "failed" not in done.stderr


def test_quiet_still_warns(tmp_path: Path) -> None:
    script = write(tmp_path, "s.js", FAILING_SCRIPT)
    done = cli("run", script, *_command(), "--quiet")
    assert done.returncode == 0
    assert done.stderr.splitlines()[-1].startswith("warning: 2 of 4 agents failed — ")


def test_the_failure_ceiling_ends_the_run(tmp_path: Path) -> None:
    script = write(tmp_path, "s.js", META_HEADER + """
const out = [];
for (const p of ['bad1', 'bad2', 'bad3', 'good']) out.push(await agent(p));
return out;
""")
    done = cli("run", script, *_command(), "--max-failed-agents", "1")
    assert done.returncode == 1
    assert done.stderr.splitlines()[-1] == (
        "Error: workflow run failed: AGENT_FAILED: 2 agents failed, more than the failure "
        "ceiling allows (max_failed_agents=1); the most frequent reason (1 of them): provider: "
        "quota exhausted for bad1 (command exited with status 3)")
    refused = cli("run", script, "--max-failed-agents", "-1")
    assert refused.returncode == 2 and "--max-failed-agents" in refused.stderr


def test_runs_show_and_logs_carry_the_failures(tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite3"
    script = write(tmp_path, "s.js", FAILING_SCRIPT)
    done = cli("run", script, *_command(), "--json", store=store)
    assert done.returncode == 0, done.stderr
    run_id = json.loads(done.stdout)["run_id"]
    listed = cli("runs", "--json", store=store)
    (summary,) = json.loads(listed.stdout)
    assert summary["agents"] == 4 and summary["agents_failed"] == 2
    table = cli("runs", store=store).stdout.splitlines()
    assert table[0].split()[3:6] == ["AGENTS", "REPLAYED", "FAILED"]
    assert table[1].split()[3:6] == ["4", "0", "2"]
    shown = cli("show", run_id, store=store).stdout
    assert "agents:      4 started, 2 failed, 0 replayed" in shown
    header = next(line for line in shown.splitlines() if line.startswith("SEQ"))
    assert header.split()[-1] == "REASON"
    row = next(line for line in shown.splitlines() if line.strip().startswith("2 "))
    assert row.split("  no  ")[1].strip() == ("provider: quota exhausted for bad1 (command "
                                              "exited with status 3) …"), row  # tail: --agent
    assert next(line for line in shown.splitlines()
                if line.strip().startswith("1 ")).endswith("-")
    document = json.loads(cli("show", run_id, "--json", store=store).stdout)
    assert document["agents_failed"] == 2
    assert document["agent_calls"][1]["reason"].startswith("provider: quota exhausted for bad1")
    logs = cli("logs", run_id, store=store).stdout.splitlines()
    assert ("[agent 2 failed] invoice 2 — provider: quota exhausted for bad1 (command exited "
            "with status 3) …") in logs  # the stderr tail follows in show --agent
    assert ", 4 agents, 2 failed, " in logs[-1]


# ---- the reporters, in process (fed events as an engine would) ------------------------------

def _events() -> list[object]:
    from dsh_workflow import (
        AgentEnded,
        AgentFailure,
        AgentStarted,
        RunInfo,
        WorkflowEnded,
        WorkflowMeta,
        WorkflowStarted,
    )

    info = RunInfo(id="r1", meta=WorkflowMeta(name="inv", description="d"))
    invalid = AgentFailure.of("invalid", "/number: 'INV-12' does not match '^INV-\\d{4}$'",
                              ["/number: 'INV-12' does not match '^INV-\\d{4}$'"])
    return [WorkflowStarted(run=info),
            AgentStarted(run=info, seq=3, label="invoice 3"),
            AgentEnded(run=info, seq=3, label="invoice 3", outcome="failed", error=invalid),
            AgentStarted(run=info, seq=4, label="invoice 4"),
            AgentEnded(run=info, seq=4, label="invoice 4", outcome="timeout",
                       error=AgentFailure.of("timeout", "the child ran longer than "
                                             "agent_timeout_s=1 and was cancelled")),
            WorkflowEnded(run=info, stop_reason="completed", agents_started=2, agents_failed=2)]


def test_plain_lines_carry_the_reason_and_the_warning_groups_them() -> None:
    import io

    from dsh_workflow._cli.progress import PlainProgress

    stream = io.StringIO()
    progress = PlainProgress(stream)
    for event in _events():
        progress(event)  # type: ignore[arg-type]
    lines = stream.getvalue().splitlines()
    assert lines[2] == ("[agent 3 failed] invoice 3 — invalid: /number: 'INV-12' does not match "
                        "'^INV-\\d{4}$'")
    assert lines[4] == ("[agent 4 timeout] invoice 4 — timeout: the child ran longer than "
                        "agent_timeout_s=1 and was cancelled")
    assert ", 2 agents, 2 failed, " in lines[5]
    assert lines[6] == ("warning: 2 of 2 agents failed — 1 invalid: /number: does not match "
                        "'^INV-\\d{4}$'; 1 timeout: the child ran longer than agent_timeout_s=1 "
                        "and was cancelled")


def test_the_live_panel_shows_the_latest_reason() -> None:
    import io

    from rich.console import Console

    from dsh_workflow._cli.progress import RichProgress

    console = Console(file=io.StringIO(), width=200, force_terminal=True)
    progress = RichProgress(console)
    for event in _events()[:3]:
        progress(event)  # type: ignore[arg-type]
    with console.capture() as captured:
        console.print(progress)
    assert ("[agent 3 failed] invoice 3 — invalid: /number: 'INV-12' does not match "
            "'^INV-\\d{4}$'") in captured.get()
    progress.abort()


def test_refused_credentials_end_the_run_with_the_cause(tmp_path: Path) -> None:
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    seen: list[str] = []

    class Refusing(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            seen.append(self.headers.get("Authorization", ""))
            body = json.dumps({"error": {"message": "Incorrect API key provided: "
                                                    "sk-wrong-0123456789",
                                         "type": "invalid_request_error"}}).encode()
            self.send_response(401)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Refusing)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}/v1"
    script = write(tmp_path, "s.js", META_HEADER +
                   "return await parallel([1, 2, 3, 4, 5].map((i) => () => agent('p' + i)))")
    try:
        done = cli("run", script, "--provider", "openai", "--base-url", base, "--model", "m",
                   "--max-concurrency", "1", extra_env={"OPENAI_API_KEY": "sk-wrong-0123456789",
                                                        "NO_PROXY": "127.0.0.1"})
    finally:
        server.shutdown()
        server.server_close()
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines()[-1] == (
        "Error: workflow run failed: AGENT_FAILED: agent 1 (p1) failed (auth): the provider "
        f"refused its credentials: 401 Incorrect API key provided: [REDACTED] ({base})")
    assert "Traceback" not in done.stderr and "sk-wrong-0123456789" not in done.stderr
    assert len(seen) == 1


def test_check_knows_the_failure_option() -> None:
    from dsh_workflow._cli.lint import lint

    assert lint("await agent('a', {failure: 'throw'}); await agent('b', {failure: 'null'})") == []
    (warning,) = lint("await agent('a', {failure: 'raise'})")
    assert warning.message == 'agent() option "failure" must be one of "null", "throw" (got "raise")'


def test_a_retry_is_shown_live_stored_and_printed_by_logs(tmp_path: Path) -> None:
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    seen: list[str] = []

    class Limited(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            seen.append(self.path)
            if len(seen) == 1:
                status, extra = 429, {"Retry-After": "1"}
                body: dict[str, Any] = {"error": {"message": "Rate limit reached", "type": "requests"}}
            else:
                status, extra = 200, {}
                body = {"choices": [{"message": {"role": "assistant", "content": "fine"}}],
                        "usage": {"prompt_tokens": 3, "completion_tokens": 2}}
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for key, value in extra.items():
                self.send_header(key, value)
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Limited)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base = f"http://127.0.0.1:{server.server_address[1]}/v1"
    store = tmp_path / "runs.sqlite3"
    script = write(tmp_path, "s.js", META_HEADER + "return await agent('p', {label: 'ask'})")
    try:
        done = cli("run", script, "--provider", "openai", "--base-url", base, "--model", "m",
                   "--json", store=store, extra_env={"NO_PROXY": "127.0.0.1"})
    finally:
        server.shutdown()
        server.server_close()
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["value"] == "fine" and len(seen) == 2
    line = "[agent 1 retrying in 1s] rate limited"
    lines = done.stderr.splitlines()
    assert line in lines
    assert lines.index(line) < lines.index("[agent 1 completed] ask")
    run_id = json.loads(done.stdout)["run_id"]
    logs = cli("logs", run_id, store=store).stdout.splitlines()
    assert line in logs

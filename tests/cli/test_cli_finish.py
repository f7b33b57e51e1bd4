"""Command-line fit and finish (SPEC §18), each in real ``dsh-workflow`` processes: run-id
prefixes, ``--version``, counts of running and interrupted runs, limit errors naming their
flag, ``check`` without meta, an unknown ``run NAME``, the ``--events`` lines, and a prompt
exit after a spinning script's result."""

from __future__ import annotations

import contextlib
import datetime
import importlib.metadata
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import pytest
from _support import cli_command, cli_env, run_cli, wait_spinning, wait_until

from dsh_workflow import SQLiteRunStore
from dsh_workflow.testing import check_run_events, events_from_records

META_HEADER = "export const meta = { name: 'finish', description: 'a CLI finish test' };\n"
SPIN = META_HEADER + "while (true) {}\n"


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


class Watched:
    """A ``dsh-workflow`` process whose stderr lines are collected with their arrival times."""

    def __init__(self, *argv: str | Path, cwd: Path, store: Path | None = None) -> None:
        self.started = time.monotonic()
        self.process = subprocess.Popen(
            cli_command(*argv), cwd=cwd,
            env=cli_env(store=store), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            encoding="utf-8")
        self.lines: list[tuple[float, str]] = []
        self.stdout = ""
        self._readers = [threading.Thread(target=self._read_err, daemon=True),
                         threading.Thread(target=self._read_out, daemon=True)]
        for reader in self._readers:
            reader.start()

    def _read_err(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append((time.monotonic(), line.rstrip("\n")))

    def _read_out(self) -> None:
        assert self.process.stdout is not None
        self.stdout = self.process.stdout.read()

    def wait_for(self, pattern: str, timeout: float = 60) -> tuple[float, re.Match[str]]:
        """The first stderr line matching ``pattern``, with its arrival time; fails with the
        stderr once the process has exited (and its stderr was read) without one, or after
        ``timeout`` seconds."""
        def seen() -> tuple[float, re.Match[str]] | None:
            for at, line in list(self.lines):
                found = re.search(pattern, line)
                if found:
                    return at, found
            if self.process.poll() is not None and not self._readers[0].is_alive():
                raise AssertionError("the process exited")
            return None

        try:
            return wait_until(seen, what=f"{pattern!r} on stderr", timeout=timeout)
        except AssertionError as exc:
            raise AssertionError(f"{pattern!r} never appeared on stderr: "
                                 f"{self.stderr()}") from exc

    def finish(self, timeout: float = 90) -> float:
        """Wait for the exit; return when it happened (monotonic)."""
        self.process.wait(timeout)
        ended = time.monotonic()
        for reader in self._readers:
            reader.join(10)
        for stream in (self.process.stdout, self.process.stderr):
            if stream is not None:
                stream.close()
        return ended

    def stderr(self) -> str:
        return "\n".join(line for _, line in self.lines)

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.finish()


def run_id_of(stderr: str) -> str:
    found = re.search(r"\(run ([0-9a-f-]{36})\)|run id: ([0-9a-f-]{36})", stderr)
    assert found, stderr
    return found.group(1) or found.group(2)


# -- run-id prefixes ---------------------------------------------------------------------------


def _store_with(path: Path, ids: list[str]) -> None:
    async def create() -> None:
        async with SQLiteRunStore(str(path)) as store:
            for index, run_id in enumerate(ids):
                await store.create_run(run_id, meta={"name": f"run-{index}",
                                                     "description": "made by the test"},
                                       script="return 1", created_at=1_000_000.0 + index)
                await store.finish_run(run_id, status="completed",
                                       result={"value": index, "stop_reason": "completed"})

    anyio.run(create)


def test_a_run_id_may_be_any_unique_prefix_of_four_characters(tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite3"
    done = run_cli("run", write(tmp_path, "s.js", META_HEADER + "return await agent('hi');"),
               "--store", store, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    run_id = run_id_of(done.stderr)
    for prefix in (run_id[:4], run_id[:8].upper(), run_id):
        shown = run_cli("show", prefix, "--store", store, cwd=tmp_path)
        assert shown.returncode == 0, shown.stderr
        assert f"run:         {run_id}" in shown.stdout
    logs = run_cli("logs", run_id[:6], "--store", store, cwd=tmp_path)
    assert logs.returncode == 0 and f"(run {run_id})" in logs.stdout
    resumed = run_cli("resume", run_id[:5], "--json", "--store", store, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming run {run_id}" in resumed.stderr  # the whole id, found from the prefix
    saved = run_cli("save", run_id[:7], "--to", tmp_path / "saved", "--store", store, cwd=tmp_path)
    assert saved.returncode == 0, saved.stderr
    assert (tmp_path / "saved" / "finish.js").is_file()

    short = run_cli("show", run_id[:3], "--store", store, cwd=tmp_path)
    assert short.returncode == 2
    assert "at least 4 characters" in short.stderr and short.stderr.startswith("Error: ")
    missing = run_cli("show", "ffffffff-no-such", "--store", store, cwd=tmp_path)
    assert missing.returncode == 2 and "no run 'ffffffff-no-such'" in missing.stderr


def test_an_ambiguous_prefix_lists_the_matches(tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite3"
    ids = ["abcd1111-0000-4000-8000-000000000001", "abcd2222-0000-4000-8000-000000000002",
           "beef3333-0000-4000-8000-000000000003"]
    _store_with(store, ids)
    for command in (["show", "abcd"], ["logs", "abcd"], ["resume", "abcd"], ["save", "abcd"]):
        done = run_cli(*command, "--store", store, cwd=tmp_path)
        assert done.returncode == 2, (command, done.stderr)
        assert done.stderr.startswith("Error: the run id prefix 'abcd' is ambiguous"), done.stderr
        assert ids[0] in done.stderr and ids[1] in done.stderr and ids[2] not in done.stderr
        assert "run-0" in done.stderr and "run-1" in done.stderr
    one = run_cli("show", "abcd2", "--store", store, cwd=tmp_path)
    assert one.returncode == 0 and f"run:         {ids[1]}" in one.stdout
    exact = run_cli("show", "beef3333-0000-4000-8000-000000000003", "--json", "--store", store,
                cwd=tmp_path)
    assert json.loads(exact.stdout)["id"] == ids[2]


# -- --version ---------------------------------------------------------------------------------


def test_version(tmp_path: Path) -> None:
    done = run_cli("--version", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"dsh-workflow {importlib.metadata.version('dsh-workflow')}"


# -- counts of running and interrupted runs ----------------------------------------------------

AGENT = """
import os, sys, time
prompt = sys.stdin.read()
print('dsh-workflow-usage: {"input_tokens": 5, "output_tokens": 7}', file=sys.stderr)
if "bad" in prompt:
    sys.exit(3)
if "slow" in prompt:
    with open(os.environ["PIDFILE"], "w") as f:
        f.write(str(os.getpid()))
    time.sleep(60)
print("ok " + prompt)
"""


def _runs_entry(tmp_path: Path, store: Path, run_id: str) -> dict[str, Any]:
    listed = run_cli("runs", "--json", "--store", store, cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    return next(entry for entry in json.loads(listed.stdout) if entry["id"] == run_id)


def test_running_and_interrupted_runs_are_counted_from_their_events(tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite3"
    agent = write(tmp_path, "agent.py", AGENT)
    pidfile = tmp_path / "slow.pid"
    wrapper = write(tmp_path, "agent.sh", f"#!/bin/sh\nPIDFILE={pidfile} exec "
                                          f"{sys.executable} {agent}\n")
    wrapper.chmod(0o755)
    script = write(tmp_path, "s.js", META_HEADER + """
phase('Work');
await agent('one', {label: 'one'});
await agent('bad', {label: 'bad'});
await agent('slow', {label: 'slow'});
return 1;
""")
    watched = Watched("run", script, "--provider", "command", "--command", str(wrapper),
                      "--store", store, cwd=tmp_path)
    try:
        watched.wait_for(r"\[agent 3 started\]")
        run_id = run_id_of(watched.stderr())
        entry = _runs_entry(tmp_path, store, run_id)
        assert entry["status"] == "running"
        assert (entry["agents"], entry["agents_failed"], entry["replayed"], entry["tokens"]) \
            == (3, 1, 0, 24)
        table = run_cli("runs", "--store", store, cwd=tmp_path).stdout.splitlines()
        row = next(line for line in table if line.startswith(run_id))
        # agents, replayed, failed, cancelled, tokens
        assert row.split()[2:8] == ["running", "3", "0", "1", "0", "24"]
        shown = run_cli("show", run_id, "--store", store, cwd=tmp_path).stdout
        assert "agents:      3 started, 1 failed, 0 replayed, 24 tokens" in shown
        assert re.search(r"3\s+slow\s+Work\s+running", shown), shown

        watched.process.send_signal(signal.SIGKILL)  # the owner dies: no end is recorded
        watched.finish()
        # each look runs the command: at most five a second
        wait_until(lambda: _runs_entry(tmp_path, store, run_id)["status"] == "interrupted",
                   what="the killed run to read interrupted", timeout=20, interval=0.2)
        entry = _runs_entry(tmp_path, store, run_id)
        assert (entry["agents"], entry["agents_failed"], entry["tokens"]) == (3, 1, 24)
        shown = run_cli("show", run_id, "--store", store, cwd=tmp_path).stdout
        assert "status:      interrupted" in shown
        assert "agents:      3 started, 1 failed, 0 replayed, 24 tokens" in shown
        assert re.search(r"3\s+slow\s+Work\s+interrupted", shown), shown
        assert re.search(r"2\s+bad\s+Work\s+failed", shown), shown
        logs = run_cli("logs", run_id, "--store", store, cwd=tmp_path).stdout.splitlines()
        assert logs[-1] == "[interrupted] the process running it died before the run ended"
        assert "[agent 3 started] slow" in logs
        document = json.loads(run_cli("show", run_id[:8], "--json", "--store", store,
                                  cwd=tmp_path).stdout)
        assert (document["agents"], document["agents_failed"]) == (3, 1)
        assert document["usage"] == {"input_tokens": 10, "output_tokens": 14}
        assert document["agent_calls"][2]["outcome"] == "interrupted"
    finally:
        watched.kill()
        if pidfile.exists():  # the slow child lives in its own session: end it here
            with contextlib.suppress(ProcessLookupError, ValueError):
                os.kill(int(pidfile.read_text()), signal.SIGKILL)


# -- limit errors name the flag ----------------------------------------------------------------


@pytest.mark.parametrize(("options", "script", "setting", "flag"), [
    (["--budget", "150"],
     "const r = []; for (let i = 0; i < 10; i++) r.push(await agent('word '.repeat(40) + i));"
     " return r;", "budget_tokens=150", "--budget 150"),
    (["--max-agents", "3"],
     "return await parallel([1, 2, 3, 4, 5].map((i) => () => agent('x' + i)));",
     "max_total_agents=3", "--max-agents 3"),
    (["--timeout", "1", "--echo-latency", "5"], "return await agent('slow');",
     "run_timeout_s=1", "--timeout 1"),
])
def test_a_limit_error_names_the_flag_that_set_it(tmp_path: Path, options: list[str],
                                                 script: str, setting: str, flag: str) -> None:
    done = run_cli("run", write(tmp_path, "s.js", META_HEADER + script), "--no-store", *options,
               cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    error = next(line for line in done.stderr.splitlines() if line.startswith("Error: "))
    assert setting in error and f"(set by {flag})" in error, error
    assert f"(set by {flag})" in json.loads(done.stdout)["error"]


def test_an_error_about_no_flag_given_names_none(tmp_path: Path) -> None:
    done = run_cli("run", write(tmp_path, "s.js", META_HEADER + "throw new Error('plain');"),
               "--no-store", "--budget", "1000", cwd=tmp_path)
    assert done.returncode == 1
    assert "set by" not in done.stderr and "plain" in done.stderr


# -- check without meta ------------------------------------------------------------------------


def test_check_reports_a_syntax_error_also_without_meta(tmp_path: Path) -> None:
    bad = run_cli("check", write(tmp_path, "bad.js", "const x = 1;\n\nreturn x +;\n"), cwd=tmp_path)
    assert bad.returncode == 2
    assert bad.stderr.startswith("Error: ") and bad.stderr.count("\n") == 1
    assert re.search(r"SyntaxError.*\(line 3, column \d+\)", bad.stderr), bad.stderr
    assert "no meta" in bad.stderr
    fine = run_cli("check", write(tmp_path, "fine.js", "return 1;\n"), cwd=tmp_path)
    assert fine.returncode == 2 and fine.stderr.startswith("Error: no meta") \
        and "line" not in fine.stderr


# -- run NAME, unknown -------------------------------------------------------------------------


def test_an_unknown_workflow_name_lists_saved_ones_and_the_closest(tmp_path: Path) -> None:
    folder = tmp_path / "flows"
    folder.mkdir()
    write(folder, "a.js", "export const meta = {name: 'code-review', description: 'Review code'};"
                          "\nreturn 1;\n")
    write(folder, "b.js", "export const meta = {name: 'summarize', description: 'Sum up'};"
                          "\nreturn 2;\n")
    done = run_cli("run", "code-reveiw", "--workflows", folder, "--no-store", cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("Error: no file or saved workflow named 'code-reveiw'; "
                                  "did you mean 'code-review'?"), done.stderr
    assert re.search(r"^\s+code-review\s+Review code$", done.stderr, re.M)
    assert re.search(r"^\s+summarize\s+Sum up$", done.stderr, re.M)
    ran = run_cli("run", "code-review", "--workflows", folder, "--no-store", cwd=tmp_path)
    assert ran.returncode == 0 and json.loads(ran.stdout) == 1
    nothing = run_cli("run", "nothing-here", "--no-store", cwd=tmp_path)
    assert nothing.returncode == 2
    assert "no saved workflows in:" in nothing.stderr


# -- --events ----------------------------------------------------------------------------------


def test_event_lines_carry_a_utc_time_and_the_meta_once(tmp_path: Path) -> None:
    events_file = tmp_path / "events.jsonl"
    script = write(tmp_path, "s.js", META_HEADER + """
phase('P');
log('hello');
return await parallel([1, 2].map((i) => () => agent('x' + i)));
""")
    before = datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=1)
    for _ in range(2):  # two runs appended to one file
        done = run_cli("run", script, "--events", events_file, "--no-store", "-q", cwd=tmp_path)
        assert done.returncode == 0, done.stderr
    after = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=1)
    records = [json.loads(line) for line in events_file.read_text("utf-8").splitlines()]
    stamps = []
    for record in records:
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", record["ts"]), record
        stamp = datetime.datetime.fromisoformat(record["ts"])
        assert stamp.utcoffset() == datetime.timedelta(0) and before <= stamp <= after
        stamps.append(stamp)
        if record["event"] == "WorkflowStarted":
            assert record["run"]["meta"]["name"] == "finish"
        else:
            assert record["run"] == {"id": record["run"]["id"]}  # no meta repeated
    assert stamps == sorted(stamps)
    assert [r["event"] for r in records].count("WorkflowStarted") == 2
    events = events_from_records(records)  # the meta restored from each run's first line
    run_ids = list(dict.fromkeys(event.run.id for event in events))
    assert len(run_ids) == 2
    for run_id in run_ids:
        check_run_events(events, run_id)
    assert all(event.run.meta.name == "finish" for event in events)


def test_event_records_without_their_meta_are_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="without its meta"):
        events_from_records([{"event": "LogEmitted", "ts": "2026-01-01T00:00:00.000Z",
                              "run": {"id": "r1"}, "message": "x"}])


# -- a prompt exit after the result ------------------------------------------------------------


def _exit_after_result(watched: Watched) -> tuple[float, float]:
    printed, _ = watched.wait_for(r"^Error: ", timeout=90)
    ended = watched.finish()
    return printed, ended


def test_the_process_exits_within_a_second_of_a_timed_out_spinning_script(tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite3"
    watched = Watched("run", write(tmp_path, "spin.js", SPIN), "--timeout", "3", "--store", store,
                      cwd=tmp_path)
    try:
        printed, ended = _exit_after_result(watched)
    finally:
        watched.kill()
    assert watched.process.returncode == 1
    assert "TIMEOUT" in watched.stderr() and "(set by --timeout 3)" in watched.stderr()
    assert ended - printed < 1.0, f"exited {ended - printed:.2f} s after the result"
    result = json.loads(watched.stdout)
    assert result["error_code"] == "TIMEOUT"
    shown = run_cli("show", result["run_id"], "--json", "--store", store, cwd=tmp_path)
    assert json.loads(shown.stdout)["status"] == "error"  # the end was recorded first


def test_the_process_exits_within_a_second_of_cancelling_a_spinning_script(
        tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite3"
    watched = Watched("run", write(tmp_path, "spin.js", SPIN), "--store", store, cwd=tmp_path)
    try:
        watched.wait_for(r"^\[start\]")
        wait_spinning(watched.process.pid)
        watched.process.send_signal(signal.SIGINT)
        printed, ended = _exit_after_result(watched)
    finally:
        watched.kill()
    assert watched.process.returncode == 130
    assert ended - printed < 1.0, f"exited {ended - printed:.2f} s after the result"
    result = json.loads(watched.stdout)
    assert result["stop_reason"] == "cancelled"
    shown = run_cli("show", result["run_id"], "--json", "--store", store, cwd=tmp_path)
    assert json.loads(shown.stdout)["status"] == "cancelled"

"""Durable runs on the command line (docs/durable-runs.md), as real processes on a real store file: ``run``
recording by default, ``runs``, ``show``, ``logs [--follow]``, ``resume``, and Ctrl-C telling how
to resume."""

from __future__ import annotations

import io
import json
import re
import shlex
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from _support import cli_command, cli_env, run_cli, store_has_call, wait_for_output, wait_until
from rich.console import Console

from dsh_workflow import (
    AgentReplayed,
    AgentStarted,
    RunInfo,
    WorkflowEnded,
    WorkflowEvent,
    WorkflowMeta,
    WorkflowStarted,
)
from dsh_workflow._cli.progress import PlainProgress, RichProgress

UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
META_HEADER = "export const meta = { name: 'durable-cli', description: 'a durable CLI test' };\n"
STEPS = META_HEADER + """
phase('Steps');
const out = [];
for (let i = 1; i <= 4; i++) out.push(await agent('step ' + i, { label: 'step ' + i }));
return out;
"""
STEPS_VALUE = [f"echo: step {i}" for i in range(1, 5)]


def start(*argv: str | Path, cwd: Path, err: Path,
          store: Path | None = None) -> subprocess.Popen[bytes]:
    with err.open("wb") as err_file:
        return subprocess.Popen(cli_command(*argv), cwd=cwd,
                                env=cli_env(store=store), stdout=subprocess.PIPE, stderr=err_file)


def run_id_of(stderr: str) -> str:
    found = re.search(f"run id: ({UUID})|\\(run ({UUID})\\)", stderr)
    assert found, stderr
    return found.group(1) or found.group(2)


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def runs_json(cwd: Path, store: Path, *extra: str) -> list[dict[str, Any]]:
    done = run_cli("runs", "--json", "--store", store, *extra, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]  # the command prints a JSON object


# -- where runs are recorded ---------------------------------------------------------------------


def test_run_records_under_the_current_directory_by_default(tmp_path: Path) -> None:
    script = write(tmp_path, "s.js", STEPS)
    done = run_cli("run", script, "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert f"[start] durable-cli (run {result['run_id']})" in done.stderr
    folder = tmp_path / ".dsh-workflow"
    assert (folder / "runs.sqlite3").is_file()
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700  # the folder is private
    listed = run_cli("runs", "--json", cwd=tmp_path)  # the same default from the same directory
    assert [run["id"] for run in json.loads(listed.stdout)] == [result["run_id"]]


def test_environment_variable_names_the_default_store(tmp_path: Path) -> None:
    store = tmp_path / "elsewhere" / "mine.sqlite3"
    done = run_cli("run", write(tmp_path, "s.js", STEPS), "-q", cwd=tmp_path, store=store)
    assert done.returncode == 0, done.stderr
    assert store.is_file() and not (tmp_path / ".dsh-workflow").exists()
    assert [run["id"] for run in runs_json(tmp_path, store)] == [run_id_of(done.stderr)]


def test_no_store_records_nothing(tmp_path: Path) -> None:
    done = run_cli("run", write(tmp_path, "s.js", STEPS), "--no-store", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / ".dsh-workflow").exists()
    assert "run id:" not in done.stderr
    listed = run_cli("runs", cwd=tmp_path)
    assert listed.returncode == 0 and listed.stdout.startswith("no runs in ")
    assert not (tmp_path / ".dsh-workflow").exists()  # reading never creates a store


def test_run_id_is_on_stderr_in_quiet_mode(tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite3"
    done = run_cli("run", write(tmp_path, "s.js", STEPS), "-q", "--json", "--store", store,
               cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stderr == f"run id: {json.loads(done.stdout)['run_id']}\n"


def test_a_store_that_cannot_be_created_is_a_usage_error(tmp_path: Path) -> None:
    blocker = write(tmp_path, "file", "not a folder")
    done = run_cli("run", write(tmp_path, "s.js", STEPS), "--store", blocker / "runs.sqlite3",
               cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.startswith("Error: cannot create the run store folder")
    not_a_db = write(tmp_path, "junk.sqlite3", "this is not a database" * 100)
    done = run_cli("run", write(tmp_path, "s.js", STEPS), "--store", not_a_db, cwd=tmp_path)
    assert done.returncode == 2 and "Error: run store " in done.stderr
    assert "Traceback" not in done.stderr


# -- runs, show, logs ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A store with three runs: completed, error, and a resume of the completed one (the
    tests only read it)."""
    tmp_path = tmp_path_factory.mktemp("history")
    store = tmp_path / "runs.sqlite3"
    ok = run_cli("run", write(tmp_path, "ok.js", STEPS), "--args", '{"n": 1}', "--store", store,
             cwd=tmp_path)
    bad = run_cli("run", write(tmp_path, "bad.js", META_HEADER + "await agent('one');\n"
                           "throw new Error('broken on purpose');"), "--store", store,
              cwd=tmp_path)
    again = run_cli("resume", run_id_of(ok.stderr), "--store", store, cwd=tmp_path)
    assert (ok.returncode, bad.returncode, again.returncode) == (0, 1, 0), again.stderr
    return {"store": store, "ok": run_id_of(ok.stderr), "bad": run_id_of(bad.stderr),
            "again": run_id_of(again.stderr)}


def test_runs_lists_newest_first(tmp_path: Path, history: dict[str, Any]) -> None:
    store = history["store"]
    listed = runs_json(tmp_path, store)
    assert [run["id"] for run in listed] == [history["again"], history["bad"], history["ok"]]
    first = {run["id"]: run for run in listed}
    assert first[history["ok"]]["status"] == "completed"
    assert (first[history["ok"]]["agents"], first[history["ok"]]["replayed"]) == (4, 0)
    assert (first[history["again"]]["agents"], first[history["again"]]["replayed"]) == (0, 4)
    assert first[history["again"]]["resumed_from"] == history["ok"]
    assert first[history["ok"]]["tokens"] > 0 and first[history["again"]]["tokens"] == 0
    assert first[history["bad"]]["status"] == "error"
    assert first[history["bad"]]["error_code"] == "SCRIPT_ERROR"
    assert "error_code" not in first[history["ok"]]
    assert all(run["name"] == "durable-cli" and run["duration_s"] >= 0 for run in listed)
    assert [r["id"] for r in runs_json(tmp_path, store, "--status", "error")] == [history["bad"]]
    assert [r["id"] for r in runs_json(tmp_path, store, "--limit", "1")] == [history["again"]]

    table = run_cli("runs", "--store", store, cwd=tmp_path)
    assert table.returncode == 0
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["ID", "NAME", "STATUS", "AGENTS", "REPLAYED", "FAILED",
                                "CANCELLED", "TOKENS", "STARTED", "DURATION"]
    assert [line.split()[0] for line in lines[1:]] == [history["again"], history["bad"],
                                                       history["ok"]]
    assert lines[1].split()[2:5] == ["completed", "0", "4"]
    assert re.search(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\s+\d+\.\ds$", lines[1])


def test_show_prints_meta_status_result_and_agents(tmp_path: Path,
                                                   history: dict[str, Any]) -> None:
    store = history["store"]
    shown = run_cli("show", history["again"], "--store", store, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    assert f"run:         {history['again']}" in text
    assert "name:        durable-cli" in text and "status:      completed" in text
    assert f"resumed from {history['ok']}" in text
    assert '"echo: step 4"' in text
    rows = [line.split() for line in text.splitlines() if re.match(r"\s*\d+\s+step", line)]
    assert rows == [[str(i), "step", str(i), "Steps", "completed", "-", "yes", "-"]
                    for i in range(1, 5)]

    failed = run_cli("show", history["bad"], "--store", store, cwd=tmp_path)
    assert "status:      error" in failed.stdout and "broken on purpose" in failed.stdout
    assert "error code:  SCRIPT_ERROR" in failed.stdout
    assert re.search(r"1\s+one\s+-\s+completed\s+\d+\s+no", failed.stdout)


def test_show_result_prints_the_whole_value_or_one_part(tmp_path: Path,
                                                        history: dict[str, Any]) -> None:
    """``show --result [--pointer]`` (SPEC §26, whole results): the value as the tool renders
    it, or its part at an RFC 6901 pointer; a run without a value or a pointer naming nothing
    is a usage error."""
    store = history["store"]
    whole = run_cli("show", history["ok"], "--result", "--store", store, cwd=tmp_path)
    assert whole.returncode == 0, whole.stderr
    assert whole.stdout == json.dumps(STEPS_VALUE, indent=2) + "\n"
    part = run_cli("show", history["ok"], "--result", "--pointer", "/2", "--store", store,
               cwd=tmp_path)
    assert part.returncode == 0 and part.stdout == '"echo: step 3"\n', part.stderr
    past = run_cli("show", history["ok"], "--result", "--pointer", "/9", "--store", store,
               cwd=tmp_path)
    assert past.returncode == 2 and "'/9' is past the end of the array (4 items)" in past.stderr
    failed = run_cli("show", history["bad"], "--result", "--store", store, cwd=tmp_path)
    assert failed.returncode == 2
    assert "has no return value: it did not complete (error)" in failed.stderr
    alone = run_cli("show", history["ok"], "--pointer", "/0", "--store", store, cwd=tmp_path)
    assert alone.returncode == 2 and "--pointer needs --result" in alone.stderr


def test_show_json_is_one_document(tmp_path: Path, history: dict[str, Any]) -> None:
    shown = run_cli("show", history["ok"], "--json", "--store", history["store"], cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    document = json.loads(shown.stdout)
    assert document["id"] == history["ok"] and document["status"] == "completed"
    assert document["meta"]["name"] == "durable-cli" and document["args"] == {"n": 1}
    assert document["result"]["value"] == STEPS_VALUE
    assert "agent('step ' + i" in document["script"]
    calls = document["agent_calls"]
    assert [(c["seq"], c["label"], c["phase"], c["outcome"], c["replayed"]) for c in calls] == \
        [(i, f"step {i}", "Steps", "completed", False) for i in range(1, 5)]
    assert all(c["tokens"] > 0 for c in calls)


def test_logs_prints_the_stored_events(tmp_path: Path, history: dict[str, Any]) -> None:
    logs = run_cli("logs", history["again"], "--store", history["store"], cwd=tmp_path)
    assert logs.returncode == 0, logs.stderr
    assert logs.stdout.splitlines() == [
        f"[start] durable-cli (run {history['again']})", "[phase] Steps",
        *(f"[agent {i} replayed] step {i}" for i in range(1, 5)),
        logs.stdout.splitlines()[-1]]
    assert re.fullmatch(r"\[done\] completed in \d+\.\ds, 0 agents, 4 replayed, 0 tokens",
                        logs.stdout.splitlines()[-1])
    original = run_cli("logs", history["ok"], "--store", history["store"], cwd=tmp_path).stdout
    assert "[agent 1 started] step 1" in original and "[agent 4 completed] step 4" in original


@pytest.mark.parametrize("command", ["show", "logs", "resume"])
def test_unknown_run_id_exits_2(tmp_path: Path, history: dict[str, Any], command: str) -> None:
    done = run_cli(command, "no-such-run", "--store", history["store"], cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr == f"Error: no run 'no-such-run' in the run store {history['store']}\n"
    assert done.stdout == ""


@pytest.mark.parametrize("command", ["show", "logs", "resume"])
def test_missing_store_is_an_unknown_run_and_is_not_created(tmp_path: Path, command: str) -> None:
    done = run_cli(command, "some-run", cwd=tmp_path)
    assert done.returncode == 2 and "Error: no run 'some-run'" in done.stderr
    assert not (tmp_path / ".dsh-workflow").exists()


def test_logs_follow_streams_a_live_run_until_it_ends(tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite3"
    err = tmp_path / "run.err"
    runner = start("run", write(tmp_path, "s.js", STEPS), "--echo-latency", "1.5",
                   "--store", store, cwd=tmp_path, err=err)
    try:
        run_id = wait_for_output(err, f"\\(run ({UUID})\\)").group(1)
        follower = subprocess.Popen(
            cli_command("logs", run_id, "--follow", "--store",
             str(store)), cwd=tmp_path, env=cli_env(), stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, encoding="utf-8")
        try:
            assert follower.stdout is not None
            first = follower.stdout.readline()  # arrives while the run is still going
            assert first == f"[start] durable-cli (run {run_id})\n"
            assert runner.poll() is None
            rest = follower.stdout.read()  # (communicate() would miss what readline buffered)
            ended_at = time.monotonic()
            follow_err = follower.communicate(timeout=30)[1]
        finally:
            follower.kill()
        runner.communicate(timeout=30)
    finally:
        runner.kill()
    assert follower.returncode == 0, follow_err
    lines = (first + rest).splitlines()
    assert [line for line in lines if line.startswith("[agent")] == [
        f"[agent {i} {what}] step {i}" for i in range(1, 5) for what in ("started", "completed")]
    assert lines[-1].startswith("[done] completed in ")
    assert runner.returncode == 0
    assert time.monotonic() - ended_at < 5


def test_logs_follow_of_an_ended_run_exits_at_once(tmp_path: Path,
                                                   history: dict[str, Any]) -> None:
    began = time.monotonic()
    done = run_cli("logs", history["ok"], "--follow", "--store", history["store"], cwd=tmp_path)
    assert done.returncode == 0 and done.stdout.splitlines()[-1].startswith("[done] completed")
    assert time.monotonic() - began < 15


# -- resume ----------------------------------------------------------------------------------------


def test_resume_with_a_fixed_script_and_args(tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite3"
    broken = write(tmp_path, "broken.js", META_HEADER + """
const a = await agent('step 1', { label: 'one' });
const b = await agent('step 2', { label: 'two' });
throw new Error('forgot to return ' + args.what);
""")
    failed = run_cli("run", broken, "--args", '{"what": "x"}', "--store", store, cwd=tmp_path)
    assert failed.returncode == 1
    run_id = run_id_of(failed.stderr)
    # No meta header: the stored meta is used. New args replace the stored ones.
    fixed = write(tmp_path, "fixed.js", """
const a = await agent('step 1', { label: 'one' });
const b = await agent('step 2', { label: 'two' });
const c = await agent('step 3 for ' + args.what, { label: 'three' });
return [a, b, c];
""")
    done = run_cli("resume", run_id, "--script", fixed, "--args", '{"what": "y"}', "--json",
               "--store", store, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["value"] == ["echo: step 1", "echo: step 2", "echo: step 3 for y"]
    assert result["agents_started"] == 1
    assert f"(resuming run {run_id})" not in done.stderr  # plain progress: its own line
    assert f"resuming run {run_id}" in done.stderr
    assert "[agent 1 replayed] one" in done.stderr and "[agent 2 replayed] two" in done.stderr
    assert "[agent 3 started] three" in done.stderr
    assert re.search(r"\[done\] completed in \S+, 1 agent, 2 replayed, ", done.stderr)
    record = json.loads(run_cli("show", result["run_id"], "--json", "--store", store,
                            cwd=tmp_path).stdout)
    assert record["resumed_from"] == run_id and record["args"] == {"what": "y"}
    assert record["meta"]["name"] == "durable-cli"


def test_resume_exit_codes_follow_run(tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite3"
    first = run_cli("run", write(tmp_path, "s.js", STEPS), "-q", "--store", store, cwd=tmp_path)
    run_id = run_id_of(first.stderr)
    still_broken = write(tmp_path, "b.js", "await agent('step 1'); throw new Error('still');")
    failed = run_cli("resume", run_id, "--script", still_broken, "--store", store, cwd=tmp_path)
    assert failed.returncode == 1 and "Error: workflow run failed: " in failed.stderr
    not_js = write(tmp_path, "p.js", "return (;")
    parse = run_cli("resume", run_id, "--script", not_js, "--store", store, cwd=tmp_path)
    assert parse.returncode == 2 and parse.stderr.startswith("Error: ")
    # Replayed calls take no time: only the new fifth call waits for the slow provider.
    longer = write(tmp_path, "l.js", STEPS.replace("return out;",
                                                   "out.push(await agent('five'));\nreturn out;"))
    timeout = run_cli("resume", run_id, "--script", longer, "--echo-latency", "5", "--timeout", "1",
                  "--json", "--store", store, cwd=tmp_path)
    assert timeout.returncode == 1
    result = json.loads(timeout.stdout)
    assert result["stop_reason"] == "error" and result["agents_started"] == 1
    assert timeout.stderr.count("replayed] step") == 4


def test_resume_on_the_subprocess_engine(tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite3"
    first = run_cli("run", write(tmp_path, "s.js", STEPS), "-q", "--store", store, cwd=tmp_path)
    done = run_cli("resume", run_id_of(first.stderr), "--engine", "subprocess", "--json",
               "--store", store, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["value"] == STEPS_VALUE and result["agents_started"] == 0


def test_ctrl_c_says_how_to_resume_and_that_command_finishes_the_run(tmp_path: Path) -> None:
    store = tmp_path / "not-the-default" / "runs.sqlite3"
    err = tmp_path / "run.err"
    process = start("run", write(tmp_path, "s.js", STEPS), "--echo-latency", "0.4",
                    "--store", store, cwd=tmp_path, err=err)
    try:
        wait_for_output(err, r"\[agent 2 completed\]")
        process.send_signal(signal.SIGINT)
        stdout, _ = process.communicate(timeout=20)
    finally:
        process.kill()
    assert process.returncode == 130
    assert json.loads(stdout)["stop_reason"] == "cancelled"
    stderr = err.read_text(encoding="utf-8")
    run_id = run_id_of(stderr)
    hint = re.search(r"^Resume it with: (.+)$", stderr, re.MULTILINE)
    assert hint, stderr
    argv = shlex.split(hint.group(1))
    assert argv == ["dsh-workflow", "resume", run_id, "--store", str(store)]
    assert runs_json(tmp_path, store)[0]["status"] == "cancelled"

    resumed = run_cli(*argv[1:], cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert json.loads(resumed.stdout) == STEPS_VALUE
    replayed = re.findall(r"^\[agent (\d) replayed\] step \d$", resumed.stderr, re.MULTILINE)
    started = re.findall(r"^\[agent (\d) started\] step \d$", resumed.stderr, re.MULTILINE)
    assert len(replayed) >= 2 and replayed == [str(i) for i in range(1, len(replayed) + 1)]
    assert started == [str(i) for i in range(len(replayed) + 1, 5)]


def test_ctrl_c_hint_omits_the_default_store_and_keeps_provider_options(tmp_path: Path) -> None:
    err = tmp_path / "run.err"
    agent_cmd = write(tmp_path, "agent.py", "import sys, time\ntime.sleep(0.3)\n"
                      "print('done: ' + sys.stdin.read().strip())\n")
    command = f"{sys.executable} {agent_cmd}"
    process = start("run", write(tmp_path, "s.js", STEPS), "--provider", "command",
                    "--command", command, cwd=tmp_path, err=err)
    try:
        wait_for_output(err, r"\[agent 1 completed\]")
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=20)
    finally:
        process.kill()
    stderr = err.read_text(encoding="utf-8")
    hint = re.search(r"^Resume it with: (.+)$", stderr, re.MULTILINE)
    assert hint, stderr
    argv = shlex.split(hint.group(1))
    assert argv == ["dsh-workflow", "resume", run_id_of(stderr), "--provider", "command",
                    "--command", command]
    resumed = run_cli(*argv[1:], "--json", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    result = json.loads(resumed.stdout)
    assert "[agent 1 replayed] step 1" in resumed.stderr
    assert result["agents_started"] <= 3


# -- progress in process ---------------------------------------------------------------------------

INFO = RunInfo(id="run-2", meta=WorkflowMeta(name="demo", description="d"))
RESUMED: list[WorkflowEvent] = [
    WorkflowStarted(run=INFO),
    AgentReplayed(run=INFO, seq=1, label="a"),
    AgentReplayed(run=INFO, seq=2, label="b"),
    AgentStarted(run=INFO, seq=3, label="c"),
]


def test_plain_progress_shows_replayed_agents() -> None:
    stream = io.StringIO()
    progress = PlainProgress(stream)
    for event in [*RESUMED, WorkflowEnded(run=INFO, stop_reason="completed", agents_started=1)]:
        progress(event)
    lines = stream.getvalue().splitlines()
    assert lines[1:3] == ["[agent 1 replayed] a", "[agent 2 replayed] b"]
    assert re.fullmatch(r"\[done\] completed in \S+, 1 agent, 2 replayed, 0 tokens", lines[-1])


def test_rich_panel_counts_replayed_agents() -> None:
    stream = io.StringIO()
    progress = RichProgress(Console(file=stream, force_terminal=True, width=100,
                                    color_system=None))
    for event in RESUMED:
        progress(event)
    assert "2 replayed" in progress.counts().plain
    progress(WorkflowEnded(run=INFO, stop_reason="completed", agents_started=1))
    assert "2 replayed" in stream.getvalue()


def test_a_killed_run_reads_interrupted_and_resumes(tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite3"
    err = tmp_path / "run.err"
    process = start("run", write(tmp_path, "s.js", STEPS), "--echo-latency", "1.0",
                    "--store", store, cwd=tmp_path, err=err)
    try:
        wait_for_output(err, r"\[agent 3 started\]")
        # Calls reach the store a moment after they are printed: kill once step 3 is stored
        # (read straight from the file: a command per poll could outlast the step).
        wait_until(lambda: store_has_call(store, 3), what="step 3 in the store", timeout=10)
        process.kill()  # SIGKILL: no cleanup, no resume hint
        process.communicate(timeout=20)
        assert process.returncode == -signal.SIGKILL, "the run ended before it was killed"
    finally:
        process.kill()
    stderr = err.read_text(encoding="utf-8")
    run_id = run_id_of(stderr)
    assert "Resume it with" not in stderr
    wait_until(lambda: runs_json(tmp_path, store)[0]["status"] == "interrupted",
               what="the killed run to read interrupted", timeout=10, interval=0.2)
    assert [r["id"] for r in runs_json(tmp_path, store, "--status", "interrupted")] == [run_id]
    shown = run_cli("show", run_id, "--store", store, cwd=tmp_path).stdout
    assert "status:      interrupted" in shown and "result:      none (the run was" in shown
    assert re.search(r"3\s+step 3\s+Steps\s+interrupted", shown) or \
        re.search(r"3\s+step 3\s+Steps\s+completed", shown)  # step 3 may have ended first
    logs = run_cli("logs", run_id, "--follow", "--store", store, cwd=tmp_path)
    assert logs.returncode == 0 and "[done]" not in logs.stdout  # it never ended
    resumed = run_cli("resume", run_id, "--json", "--store", store, cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    result = json.loads(resumed.stdout)
    assert result["value"] == STEPS_VALUE and result["agents_started"] <= 2

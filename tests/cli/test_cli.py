"""The ``dsh-workflow`` command line, run as a real process (``python -m dsh_workflow``)."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from dsh_workflow import (
    AgentEnded,
    AgentStarted,
    LogEmitted,
    PhaseStarted,
    RunInfo,
    WorkflowEnded,
    WorkflowMeta,
    WorkflowStarted,
)
from dsh_workflow._cli.progress import EventLog, PlainProgress, RichProgress, make_progress
from dsh_workflow.testing import check_run_events, events_from_records

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
EXAMPLE_NAMES = ["code-review", "research-pipeline", "map-reduce-summary", "verify-findings"]
RESULT_KEYS = {"value", "stop_reason", "error", "error_code", "agents_started", "run_id"}
#: What ``run --json`` prints: the whole result at the top level (SPEC §23).
JSON_KEYS = RESULT_KEYS | {"warnings", "agents_failed", "agents_cancelled", "failures", "usage",
                           "agents_replayed", "agents_unpriced",
                           "pending", "waiting_reason", "resume_after"}  # a parked run's

META_HEADER = "export const meta = { name: 'cli-test', description: 'a CLI test' };\n"
SLOW_SCRIPT = META_HEADER + """
phase('Wait');
return await parallel([1, 2, 3, 4, 5, 6].map((i) => () => agent('p' + i, { label: 'slow ' + i })));
"""
SPIN_SCRIPT = META_HEADER + "await agent('first');\nwhile (true) {}\n"
# `run` records every run by default: keep these runs out of the repository.
_STORE_DIR = tempfile.TemporaryDirectory(prefix="dsh-cli-store-")
STORE = Path(_STORE_DIR.name) / "runs.sqlite3"
UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"


def cli_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OPENAI_", "DSH_WORKFLOW_")) and k not in ("COLUMNS", "FORCE_COLOR")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["TERM"] = "dumb"
    env["DSH_WORKFLOW_STORE"] = str(STORE)
    return env


def cli(*argv: str | Path, stdin: str | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dsh_workflow", *map(str, argv)], cwd=REPO, env=cli_env(),
        input=stdin, capture_output=True, text=True, encoding="utf-8", timeout=timeout)


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def read_events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def assert_paired(records: list[dict[str, Any]]) -> None:
    """The event contract for the one run an ``--events`` file holds."""
    events = events_from_records(records)
    assert events, "no events written"
    check_run_events(events, events[0].run.id)


# -- examples ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_example_completes(name: str) -> None:
    done = cli("run", EXAMPLES / f"{name}.js")
    assert done.returncode == 0, done.stderr
    value = json.loads(done.stdout)
    assert isinstance(value, dict)
    assert "[start] " + name in done.stderr
    assert "[agent 1 started]" in done.stderr
    assert "[done] completed in " in done.stderr
    assert "[agent" not in done.stdout and "[done]" not in done.stdout
    assert "Traceback" not in done.stderr


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_example_with_its_args_file(name: str) -> None:
    args_file = EXAMPLES / "args" / f"{name}.json"
    done = cli("run", EXAMPLES / f"{name}.js", "--args", f"@{args_file}", "--json", "--quiet")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["stop_reason"] == "completed"
    assert result["agents_started"] > 0
    assert done.stderr == f"run id: {result['run_id']}\n"  # quiet keeps only the run id


def test_quiet_without_a_store_prints_nothing_on_stderr(tmp_path: Path) -> None:
    script = write(tmp_path, "s.js", META_HEADER + "return await agent('x')")
    done = cli("run", script, "--quiet", "--no-store")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == "echo: x"
    assert done.stderr == ""


@pytest.mark.parametrize("name", EXAMPLE_NAMES)
def test_example_checks(name: str) -> None:
    done = cli("check", EXAMPLES / f"{name}.js")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"ok: {name}:")


def test_examples_readme_lists_every_example() -> None:
    readme = (EXAMPLES / "README.md").read_text(encoding="utf-8")
    for name in EXAMPLE_NAMES:
        assert f"examples/{name}.js" in readme


# -- output --------------------------------------------------------------------------------------


def test_json_prints_the_whole_result(tmp_path: Path) -> None:
    script = write(tmp_path, "s.js", META_HEADER + "return { word: 'héllo', n: await agent('x') }")
    done = cli("run", script, "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert set(result) == JSON_KEYS
    assert result["value"] == {"word": "héllo", "n": "echo: x"}
    assert (result["agents_failed"], result["agents_cancelled"], result["failures"]) == (0, 0, [])
    assert result["warnings"] == [] and result["error_code"] is None
    assert set(result["usage"]) >= {"input_tokens", "output_tokens", "cost_usd"}
    assert result["stop_reason"] == "completed" and result["error"] is None
    assert result["agents_started"] == 1
    assert f"(run {result['run_id']})" in done.stderr
    assert '"héllo"' in done.stdout  # non-ASCII kept, indented by 2
    assert done.stdout.startswith('{\n  "value": {\n    "word"')


def test_value_only_without_json(tmp_path: Path) -> None:
    script = write(tmp_path, "s.js", META_HEADER + "return [1, 'two']")
    done = cli("run", script, "-q")
    assert done.returncode == 0
    assert json.loads(done.stdout) == [1, "two"]
    assert re.fullmatch(f"run id: {UUID}\n", done.stderr)  # quiet: only the run id


def test_lossy_return_value_prints_warnings_on_stderr(tmp_path: Path) -> None:
    script = write(tmp_path, "s.js", META_HEADER
                   # a Promise that never settles: an un-awaited agent() would race the run's
                   # end (started then cancelled, or never started), adding a failure line
                   + "const a = new Promise(() => {});\n"
                   + "return {items: [1, undefined], pending: a}")
    done = cli("run", script, "-q")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"items": [1, None], "pending": {}}
    lines = done.stderr.splitlines()
    first = lines.index("warning: return value.items[1]: undefined became null")
    assert lines[first + 1] == "warning: return value.pending: a Promise became {} (missing await?)"
    assert "warning" not in done.stdout
    full = cli("run", script, "-q", "--json")
    assert json.loads(full.stdout)["warnings"] == [
        "return value.items[1]: undefined became null",
        "return value.pending: a Promise became {} (missing await?)"]


def test_undefined_return_prints_null(tmp_path: Path) -> None:
    done = cli("run", write(tmp_path, "s.js", META_HEADER + "log('nothing to return')"))
    assert done.returncode == 0
    assert done.stdout == "null\n"
    assert "[log] nothing to return" in done.stderr


def test_plain_progress_lines(tmp_path: Path) -> None:
    script = write(tmp_path, "s.js", META_HEADER + "phase('Scan');\nlog('first\\nsecond');\n"
                   "await agent('a', { label: 'the label' });\nreturn 1")
    done = cli("run", script)
    lines = done.stderr.splitlines()
    assert lines[0].startswith("[start] cli-test (run ")
    assert lines[1:6] == ["[phase] Scan", "[log] first", "      second",
                          "[agent 1 started] the label", "[agent 1 completed] the label"]
    assert re.fullmatch(r"\[done\] completed in [0-9.]+s, 1 agent, [1-9][0-9]* tokens", lines[6]), \
        lines[6]
    assert len(lines) == 7


def test_events_file_is_json_lines(tmp_path: Path) -> None:
    events_file = tmp_path / "events.jsonl"
    done = cli("run", EXAMPLES / "code-review.js", "--events", events_file, "-q")
    assert done.returncode == 0, done.stderr
    events = read_events(events_file)
    assert events[0]["event"] == "WorkflowStarted"
    assert events[-1]["event"] == "WorkflowEnded"
    assert events[-1]["stop_reason"] == "completed"
    assert {e["event"] for e in events} >= {"PhaseStarted", "LogEmitted", "AgentStarted", "AgentEnded"}
    assert events[0]["run"]["meta"]["name"] == "code-review"  # the meta once, on the first line
    assert all("meta" not in e["run"] for e in events[1:])
    assert len({e["run"]["id"] for e in events}) == 1
    assert_paired(events)
    assert events[-1]["agents_started"] == sum(e["event"] == "AgentStarted" for e in events)

    cli("run", EXAMPLES / "code-review.js", "--events", events_file, "-q")  # appends
    again = read_events(events_file)
    assert [e["event"] for e in again].count("WorkflowStarted") == 2


def test_events_file_that_cannot_be_opened(tmp_path: Path) -> None:
    done = cli("run", EXAMPLES / "code-review.js", "--events", tmp_path / "missing" / "e.jsonl")
    assert done.returncode == 2
    assert done.stderr.startswith("Error: cannot open --events file")


# -- args and meta -------------------------------------------------------------------------------


def test_args_inline_from_file_and_stdin(tmp_path: Path) -> None:
    script = write(tmp_path, "s.js", META_HEADER + "return args")
    payload = {"files": ["a.py", "b.py"], "n": 3, "text": "ünïcode"}
    args_file = write(tmp_path, "args.json", json.dumps(payload))
    assert json.loads(cli("run", script, "--args", json.dumps(payload)).stdout) == payload
    assert json.loads(cli("run", script, "--args", f"@{args_file}").stdout) == payload
    assert json.loads(cli("run", script, "--args", "@-", stdin=json.dumps(payload)).stdout) == payload
    assert cli("run", script).stdout == "null\n"


@pytest.mark.parametrize(("args", "message"), [
    ("{nope", "Error: --args is not valid JSON: Expecting property name"),
    ("@/definitely/not/here.json", "Error: cannot read --args file"),
])
def test_bad_args(tmp_path: Path, args: str, message: str) -> None:
    done = cli("run", write(tmp_path, "s.js", META_HEADER + "return 1"), "--args", args)
    assert done.returncode == 2
    assert done.stderr.startswith(message)
    assert done.stdout == ""


def test_meta_option_overrides_the_file(tmp_path: Path) -> None:
    script = write(tmp_path, "s.js", META_HEADER + "return 1")
    done = cli("run", script, "--meta", '{"name": "from-flag", "description": "given on the command line"}')
    assert done.returncode == 0, done.stderr
    assert "[start] from-flag (run " in done.stderr


def test_meta_option_for_a_file_without_meta(tmp_path: Path) -> None:
    script = write(tmp_path, "s.js", "return 2")
    done = cli("run", script, "--meta", '{"name": "bare", "description": "no header"}', "-q")
    assert (done.returncode, done.stdout) == (0, "2\n")


def test_missing_meta(tmp_path: Path) -> None:
    done = cli("run", write(tmp_path, "s.js", "// no meta here\nreturn 1"))
    assert done.returncode == 2
    assert done.stderr == ("Error: no meta: add `export const meta = {name, description}` at the "
                           "top of the file or pass --meta\n")


@pytest.mark.parametrize(("header", "fragment"), [
    ("export const meta = {\n  name: makeName(),\n  description: 'x' };",
     "call `makeName(...)` is not allowed: meta is read as data, never run as code (line 2, column 9)"),
    ("export const meta = { name: 'x', description: `about ${topic}` };",
     "template interpolation (`${...}`) is not allowed: meta must be a pure literal (line 1, column 54)"),
    ("export const meta = { name, description: 'x' };", "shorthand property `name`"),
    ("export const meta = { ...defaults };", "spread (`...`)"),
])
def test_meta_literal_errors(tmp_path: Path, header: str, fragment: str) -> None:
    script = write(tmp_path, "bad.js", header + "\nreturn 1")
    for command in ("run", "check"):
        done = cli(command, script)
        assert done.returncode == 2
        assert done.stderr.startswith(f"Error: {script}: meta block: ")
        assert fragment in done.stderr
        assert "Traceback" not in done.stderr
        assert done.stdout == ""


def test_invalid_meta_is_a_start_error(tmp_path: Path) -> None:
    script = write(tmp_path, "s.js", "export const meta = { name: '', extra: 1 };\nreturn 1")
    done = cli("run", script)
    assert done.returncode == 2
    assert done.stderr.startswith("Error: invalid meta: ")
    assert "meta.extra" not in done.stderr  # an unknown key is kept, not refused
    assert "meta.description must be a non-empty string" in done.stderr
    assert done.stdout == ""


# -- check -----------------------------------------------------------------------------------------


def test_check_ok(tmp_path: Path) -> None:
    done = cli("check", write(tmp_path, "s.js", META_HEADER + "return await agent('x')"))
    assert (done.returncode, done.stdout) == (0, "ok: cli-test: meta is valid and the script parses\n")


def test_check_parse_error_has_file_line_and_column(tmp_path: Path) -> None:
    script = write(tmp_path, "s.js", "// header\nexport const meta = {\n  name: 'x',\n  description: 'y',\n};\n"
                   "const a = 1;\nconst b = (a + ;\nreturn b\n")
    done = cli("check", script)
    assert done.returncode == 2
    assert done.stderr.startswith(f"Error: {script}: workflow script does not parse")
    assert "(line 7, column" in done.stderr
    assert "Traceback" not in done.stderr


def test_check_never_runs_the_script(tmp_path: Path) -> None:
    script = write(tmp_path, "s.js", META_HEADER + "while (true) {}")
    started = time.monotonic()
    done = cli("check", script, timeout=20)
    assert done.returncode == 0
    assert time.monotonic() - started < 4  # a run would spin until the 5 s CPU-slice limit


def test_check_meta_option(tmp_path: Path) -> None:
    script = write(tmp_path, "s.js", "return 1")
    assert cli("check", script).returncode == 2
    done = cli("check", script, "--meta", '{"name": "n", "description": "d"}')
    assert done.returncode == 0, done.stderr


# -- errors and exit codes ---------------------------------------------------------------------------


def test_parse_error_on_run_is_a_start_error(tmp_path: Path) -> None:
    script = write(tmp_path, "s.js", META_HEADER + "\n\nreturn (;")
    done = cli("run", script, "--json")
    assert done.returncode == 2
    assert done.stderr.startswith("Error: workflow script does not parse")
    assert "(line 4, column" in done.stderr
    assert done.stdout == ""


def test_script_error_exits_1_with_its_line(tmp_path: Path) -> None:
    script = write(tmp_path, "s.js", "export const meta = {\n  name: 'boom',\n  description: 'throws',\n};\n"
                   "phase('Boom');\nthrow new Error('bad thing');\n")
    done = cli("run", script)
    assert done.returncode == 1
    result = json.loads(done.stdout)
    assert set(result) == RESULT_KEYS
    assert result["stop_reason"] == "error" and result["value"] is None
    assert "bad thing" in result["error"] and ":6:" in result["error"]
    assert "[done] error in " in done.stderr
    assert "Error: workflow run failed: Error: bad thing" in done.stderr
    assert "Traceback" not in done.stderr


def test_timeout_exits_1(tmp_path: Path) -> None:
    done = cli("run", write(tmp_path, "s.js", SLOW_SCRIPT), "--timeout", "0.3", "--echo-latency", "5", "-q")
    assert done.returncode == 1
    result = json.loads(done.stdout)
    assert result["stop_reason"] == "error" and "run_timeout_s=0.3" in result["error"]


def test_agent_timeout_and_limits(tmp_path: Path) -> None:
    script = write(tmp_path, "s.js", SLOW_SCRIPT)
    done = cli("run", script, "--agent-timeout", "0.2", "--echo-latency", "5", "--max-concurrency", "2")
    assert done.returncode == 0
    assert json.loads(done.stdout) == [None] * 6
    assert done.stderr.count("timeout]") == 6
    capped = cli("run", script, "--max-agents", "2", "-q")
    assert capped.returncode == 1
    assert "max_total_agents" in json.loads(capped.stdout)["error"]


@pytest.mark.parametrize(("argv", "message"), [
    ([], "Error: the following arguments are required: COMMAND"),
    (["run"], "Error: the following arguments are required: SCRIPT.js"),
    (["run", "x.js", "--max-concurrency", "0"], "must be at least 1"),
    (["run", "x.js", "--timeout", "-1"], "must be a finite number >= 0"),
    (["run", "x.js", "--provider", "nope"], "invalid choice: 'nope'"),
    (["run", "examples/code-review.js", "--model", "m"], "Error: --model applies only to --provider openai"),
    (["run", "examples/code-review.js", "--command", "cat"], "--command applies only to --provider command"),
    (["run", "examples/code-review.js", "--provider", "command"], "--provider command needs --command"),
    (["run", "examples/code-review.js", "--provider", "command", "--command", "'open"],
     "No closing quotation"),
    (["run", "examples/code-review.js", "--provider", "openai"], "OpenAIProvider needs a model"),
    (["run", "does-not-exist.js"], "Error: cannot read script 'does-not-exist.js'"),
])
def test_usage_errors_exit_2(argv: list[str], message: str) -> None:
    done = cli(*argv)
    assert done.returncode == 2
    assert message in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""


def test_command_provider(tmp_path: Path) -> None:
    script = write(tmp_path, "s.js", META_HEADER + "return await agent('hello from the prompt')")
    done = cli("run", script, "--provider", "command", "--command", "cat -", "-q")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == "hello from the prompt"


def test_non_utf8_script(tmp_path: Path) -> None:
    script = tmp_path / "latin1.js"
    script.write_bytes(META_HEADER.encode() + b"return '\xe9'")
    done = cli("run", script)
    assert done.returncode == 2
    assert "is not UTF-8 text" in done.stderr


# -- Ctrl-C ----------------------------------------------------------------------------------------


def start_cli(tmp_path: Path, *argv: str | Path) -> tuple[subprocess.Popen[bytes], Path]:
    err = tmp_path / "stderr.txt"
    with err.open("wb") as err_file:
        process = subprocess.Popen([sys.executable, "-m", "dsh_workflow", *map(str, argv)], cwd=REPO,
                                   env=cli_env(), stdout=subprocess.PIPE, stderr=err_file)
    return process, err


def wait_for(err: Path, text: str, count: int = 1, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if err.read_text(encoding="utf-8", errors="replace").count(text) >= count:
            return
        time.sleep(0.02)
    raise AssertionError(f"{text!r} x{count} not seen on stderr: {err.read_text()!r}")


def test_sigint_cancels_the_run(tmp_path: Path) -> None:
    events_file = tmp_path / "events.jsonl"
    process, err = start_cli(tmp_path, "run", write(tmp_path, "s.js", SLOW_SCRIPT),
                             "--echo-latency", "5", "--events", events_file)
    try:
        wait_for(err, "started]", count=6)
        interrupted = time.monotonic()
        process.send_signal(signal.SIGINT)
        stdout, _ = process.communicate(timeout=20)
    finally:
        process.kill()
    assert time.monotonic() - interrupted < 4
    assert process.returncode == 130
    stderr = err.read_text(encoding="utf-8")
    assert "Traceback" not in stderr and "KeyboardInterrupt" not in stderr
    result = json.loads(stdout)
    assert set(result) == RESULT_KEYS
    assert result["stop_reason"] == "cancelled" and result["value"] is None
    assert "Ctrl-C" in result["error"]
    assert result["agents_started"] == 6
    assert "Cancelling the run" in stderr
    assert stderr.count("cancelled] slow") == 6
    assert "[done] cancelled in " in stderr
    events = read_events(events_file)
    assert events[0]["event"] == "WorkflowStarted"
    assert events[-1]["event"] == "WorkflowEnded" and events[-1]["stop_reason"] == "cancelled"
    assert_paired(events)
    assert {e["outcome"] for e in events if e["event"] == "AgentEnded"} == {"cancelled"}


def test_second_sigint_exits_at_once(tmp_path: Path) -> None:
    # A script spinning in one CPU slice cannot be stopped from outside: after the first Ctrl-C
    # the result is printed at once, but the engine waits for the slice to end (5 s by default).
    process, err = start_cli(tmp_path, "run", write(tmp_path, "s.js", SPIN_SCRIPT))
    try:
        wait_for(err, "[agent 1 completed]")
        time.sleep(0.3)
        process.send_signal(signal.SIGINT)
        # The resume hint follows the printed result: from here on only the spinning slice
        # keeps the process (the end line comes earlier, before the run's end is committed).
        wait_for(err, "Resume it with:")
        second = time.monotonic()
        process.send_signal(signal.SIGINT)
        stdout, _ = process.communicate(timeout=20)
    finally:
        process.kill()
    assert time.monotonic() - second < 2.5
    assert process.returncode == 130
    assert json.loads(stdout)["stop_reason"] == "cancelled"
    stderr = err.read_text(encoding="utf-8")
    assert "Error: interrupted twice; quitting without waiting for the run" in stderr
    run_id = re.search(f"\\(run ({UUID})\\)", stderr).group(1)  # type: ignore[union-attr]  # no match fails the test anyway
    assert f"Resume it with: dsh-workflow resume {run_id}\n" in stderr  # the default store
    assert "Traceback" not in stderr


# -- progress reporters (in-process) -----------------------------------------------------------------

INFO = RunInfo(id="run-1", meta=WorkflowMeta(name="demo", description="d"))
EVENTS = [
    WorkflowStarted(run=INFO),
    PhaseStarted(run=INFO, title="Scan"),
    LogEmitted(run=INFO, message="two\nlines"),
    AgentStarted(run=INFO, seq=1, label="a", phase="Scan"),
    AgentStarted(run=INFO, seq=2, label="b", phase="Scan"),
    AgentEnded(run=INFO, seq=1, label="a", phase="Scan", outcome="completed"),
    AgentEnded(run=INFO, seq=2, label="b", phase="Scan", outcome="failed"),
    WorkflowEnded(run=INFO, stop_reason="completed", agents_started=2),
]


def test_plain_progress_in_process() -> None:
    stream = io.StringIO()
    progress = PlainProgress(stream)
    for event in EVENTS:
        progress(event)
    lines = stream.getvalue().splitlines()
    assert lines[:7] == ["[start] demo (run run-1)", "[phase] Scan", "[log] two", "      lines",
                         "[agent 1 started] a", "[agent 2 started] b", "[agent 1 completed] a"]
    assert lines[7] == "[agent 2 failed] b"
    assert lines[8].startswith("[done] completed in ") and lines[8].endswith(", 2 agents, 0 tokens")


def test_rich_progress_renders_counts_and_summary() -> None:
    stream = io.StringIO()
    progress = RichProgress(Console(file=stream, force_terminal=True, width=100, color_system=None))
    for event in EVENTS[:5]:
        progress(event)
        progress.tick()
    frame = stream.getvalue()
    assert "demo" in frame and "phase: Scan" in frame and "2 running" in frame
    assert "two …" in frame and "a, b" in frame
    for event in EVENTS[5:]:
        progress(event)
    progress.finish()
    text = stream.getvalue()
    assert "1 completed" in text and "1 failed" in text and "2 started" in text
    assert "✔ demo completed in " in text and text.rstrip().endswith("2 agents, 0 tokens")


def test_make_progress_picks_by_stream() -> None:
    assert isinstance(make_progress(io.StringIO(), quiet=False), PlainProgress)
    assert type(make_progress(io.StringIO(), quiet=True)).__name__ == "QuietProgress"


def test_event_log_in_process(tmp_path: Path) -> None:
    log = EventLog(str(tmp_path / "e.jsonl"))
    for event in EVENTS:
        log(event)
    log.close()
    log.close()
    records = read_events(tmp_path / "e.jsonl")
    assert [r["event"] for r in records] == [type(e).__name__ for e in EVENTS]
    assert records[2]["message"] == "two\nlines"
    assert records[0]["run"] == {"id": "run-1", "meta": {"name": "demo", "description": "d",
                                                         "whenToUse": None, "phases": None}}


def test_byte_order_marks_are_ignored(tmp_path: Path) -> None:
    script = tmp_path / "bom.js"
    script.write_bytes(b"\xef\xbb\xbf" + META_HEADER.encode() + b"return args")
    args_file = tmp_path / "args.json"
    args_file.write_bytes(b'\xef\xbb\xbf{"a": 1}')
    done = cli("run", script, "--args", f"@{args_file}", "-q")
    assert (done.returncode, json.loads(done.stdout)) == (0, {"a": 1})


# -- engines -------------------------------------------------------------------------------------


def test_subprocess_engine_gives_the_same_result(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    in_process = cli("run", EXAMPLES / "code-review.js", "--quiet")
    sandboxed = cli("run", EXAMPLES / "code-review.js", "--quiet", "--engine", "subprocess",
                    "--events", events)
    assert sandboxed.returncode == 0, sandboxed.stderr
    assert json.loads(sandboxed.stdout) == json.loads(in_process.stdout)
    assert_paired(read_events(events))


def test_subprocess_engine_reports_script_errors(tmp_path: Path) -> None:
    script = write(tmp_path, "boom.js", META_HEADER + "await agent('x');\nthrow new Error('boom')\n")
    done = cli("run", script, "--engine", "subprocess", "--quiet")
    assert done.returncode == 1
    assert "boom" in done.stderr and "Traceback" not in done.stderr


def test_budget_option_shows_tokens_and_stops_at_the_ceiling(tmp_path: Path) -> None:
    """--budget sets the run's token budget: the final line shows spent of budget, and agent()
    past the ceiling ends the run with BUDGET_EXCEEDED (exit 1)."""
    script = write(tmp_path, "s.js", META_HEADER + (
        "const out = [budget.total];\n"
        "for (let i = 0; i < 50; i++) { out.push(await agent('word '.repeat(20))); }\n"
        "return out.length;"))
    done = cli("run", script, "--budget", "100")
    assert done.returncode == 1, done.stderr
    assert "BUDGET_EXCEEDED" in done.stderr and "budget_tokens=100" in done.stderr
    assert re.search(r"\[done\] error in [0-9.]+s, \d+ agents?, \d+ of 100 tokens", done.stderr), \
        done.stderr
    ok = cli("run", write(tmp_path, "t.js", META_HEADER + "return budget.total"), "--budget",
             "5000", "-q")
    assert ok.returncode == 0 and json.loads(ok.stdout) == 5000
    bad = cli("run", script, "--budget", "0")
    assert bad.returncode == 2 and "--budget" in bad.stderr

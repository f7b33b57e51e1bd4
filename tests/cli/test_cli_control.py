"""Runs under control from the command line (docs/durable-runs.md, "Runs under control"), as real processes on
a real store file: ``show --agent``, ``cancel`` from another process, ``resume --rerun``,
``resume`` on the recorded provider, and ``replay-check``."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _support import cli_command, cli_env, run_cli, store_has_call, wait_for_output, wait_until

UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
HEADER = "export const meta = { name: 'control-cli', description: 'runs under control' };\n"


def start(*argv: str | Path, cwd: Path, err: Path) -> subprocess.Popen[bytes]:
    with err.open("wb") as err_file:
        return subprocess.Popen(cli_command(*argv), cwd=cwd,
                                env=cli_env(), stdout=subprocess.PIPE, stderr=err_file)


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def run_id_of(stderr: str) -> str:
    found = re.search(f"run id: ({UUID})|\\(run ({UUID})\\)", stderr)
    assert found, stderr
    return found.group(1) or found.group(2)


def runs_json(cwd: Path, store: Path) -> list[dict[str, Any]]:
    done = run_cli("runs", "--json", "--store", store, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)  # type: ignore[no-any-return]  # a JSON array


# -- show --agent ------------------------------------------------------------------------------


def test_show_agent_prints_what_a_call_was_asked_and_answered(tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite3"
    agents = tmp_path / "agents"
    agents.mkdir()
    write(agents, "critic.md", "---\nname: critic\ndescription: criticises\nmodel: big\n---\n"
          "You are a harsh critic.\n")
    script = write(tmp_path, "flow.js", HEADER + """
phase('ask');
const long = await agent('tell me ' + 'x'.repeat(5000), {label: 'long one', effort: 'low'});
const typed = await agent('typed', {agentType: 'critic', label: 'critic',
  schema: {type: 'object', properties: {s: {type: 'string', minLength: 3, maxLength: 2}},
           required: ['s']}});
return [long.length, typed];
""")
    done = run_cli("run", script, "--store", store, "--agents", agents, "--model-alias",
               "big=model-big", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    run_id = run_id_of(done.stderr)
    first = run_cli("show", run_id, "--agent", "1", "--store", store, cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    text = first.stdout
    assert "agent:       1  long one" in text and "phase:       ask" in text
    assert "outcome:     completed" in text and "effort:      low" in text
    assert "tell me xxx" in text and "[folded: " in text and "--full" in text
    assert len(text) < 6000  # the 5,000-character prompt and its echo are folded
    full = run_cli("show", run_id, "--agent", "1", "--full", "--store", store, cwd=tmp_path)
    assert "x" * 5000 in full.stdout and "[folded" not in full.stdout
    second = run_cli("show", run_id, "--agent", "2", "--store", store, cwd=tmp_path).stdout
    assert "outcome:     failed" in second
    assert "failure:     " in second  # no answer can satisfy the schema
    assert "You are a harsh critic." in second and "agent type:  critic" in second
    assert "model:       model-big" in second and '"maxLength": 2' in second
    as_json = json.loads(run_cli("show", run_id, "--agent", "2", "--json", "--store", store,
                             cwd=tmp_path).stdout)
    assert as_json["seq"] == 2 and as_json["options"]["agent_type"] == "critic"
    assert as_json["model_used"] == "model-big" and as_json["failure"]["kind"]
    missing = run_cli("show", run_id, "--agent", "3", "--store", store, cwd=tmp_path)
    assert missing.returncode == 2
    assert "has no agent() call 3 (it has calls 1-2)" in missing.stderr
    assert run_cli("show", "nope", "--agent", "1", "--store", store,
               cwd=tmp_path).returncode == 2


# -- cancel ------------------------------------------------------------------------------------

SLOW = HEADER + """
phase('slow');
return await agent('wait for it', {label: 'sleeper'});
"""


def test_cancel_stops_a_run_of_another_process(tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite3"
    script = write(tmp_path, "slow.js", SLOW)
    err = tmp_path / "run.err"
    marker = tmp_path / "child-started"
    child = tmp_path / "child.sh"
    child.write_text(f"#!/bin/sh\ntouch {marker}\nexec sleep 60\n", encoding="utf-8")
    child.chmod(0o755)
    running = start("run", script, "--store", store, "--provider", "command", "--command",
                    str(child), cwd=tmp_path, err=err)
    try:
        run_id = wait_for_output(err, f"\\(run ({UUID})\\)|run id: ({UUID})").group(0)
        run_id = re.search(UUID, run_id).group(0)  # type: ignore[union-attr]  # matched above
        wait_until(marker.exists, what=f"the child's marker (stderr: {err})")
        asked = time.monotonic()
        done = run_cli("cancel", run_id, "--store", store, cwd=tmp_path)
        took = time.monotonic() - asked
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == f"cancelled run {run_id}"
        assert running.wait(timeout=30) == 130
        assert running.stdout is not None
        result = json.loads(running.stdout.read())
    finally:
        if running.poll() is None:
            running.kill()
            running.wait()
        if running.stdout is not None:
            running.stdout.close()
    assert result["stop_reason"] == "cancelled"
    assert "cancelled from the command line" in result["error"]
    assert took < 30
    [row] = [r for r in runs_json(tmp_path, store) if r["id"] == run_id]
    assert row["status"] == "cancelled"
    # the run's own stderr tells the same
    assert "cancelled from the command line" in err.read_text()
    again = run_cli("cancel", run_id, "--store", store, cwd=tmp_path)
    assert again.returncode == 1
    assert "is not running (it is cancelled)" in again.stderr
    assert run_cli("cancel", "no-such-run", "--store", store, cwd=tmp_path).returncode == 2


def test_cancel_is_noticed_within_half_a_second(tmp_path: Path) -> None:
    """Timed from the request in the store to the run's end, both seen in the store (the CLI's
    own start-up time on a busy machine is not the owner's reaction time)."""
    store = tmp_path / "runs.sqlite3"
    script = write(tmp_path, "slow.js", SLOW)
    err = tmp_path / "run.err"
    running = start("run", script, "--store", store, "--provider", "command", "--command",
                    "sleep 60", cwd=tmp_path, err=err)
    probe = tmp_path / "probe.py"
    probe.write_text(
        "import anyio, sys, time\n"
        "from dsh_workflow import SQLiteRunStore\n"
        "async def main():\n"
        "    async with SQLiteRunStore(sys.argv[1]) as store:\n"
        "        while True:\n"
        "            runs = await store.list_runs(status='running')\n"
        "            events = await store.events(runs[0].id) if runs else []\n"
        "            if any(e.data.get('event') == 'AgentStarted' for e in events): break\n"
        "            await anyio.sleep(0.02)\n"
        "        asked = time.monotonic()\n"
        "        assert await store.request_cancel(runs[0].id)\n"
        "        while (await store.get_run(runs[0].id)).status == 'running':\n"
        "            await anyio.sleep(0.01)\n"
        "        print(time.monotonic() - asked)\n"
        "anyio.run(main)\n", encoding="utf-8")
    try:
        probed = subprocess.run([sys.executable, str(probe), str(store)], env=cli_env(),
                                capture_output=True, text=True, timeout=60)
        assert probed.returncode == 0, probed.stderr
        assert running.wait(timeout=30) == 130
    finally:
        if running.poll() is None:
            running.kill()
            running.wait()
        if running.stdout is not None:
            running.stdout.close()
    assert float(probed.stdout) < 0.5, probed.stdout


# -- resume on the recorded provider, --rerun --------------------------------------------------

CHAIN = HEADER + """
const a = await agent('one', {label: 'first'});
const b = await agent('two ' + a, {label: 'second'});
const c = await agent('three ' + b, {label: 'third'});
return [a, b, c];
"""


def _chain_run(tmp_path: Path, store: Path) -> tuple[Path, str]:
    script = write(tmp_path, "chain.js", CHAIN)
    counter = tmp_path / "count"
    agent = tmp_path / "agent.sh"
    # each child answers with its own number: a rerun shows as a new number
    agent.write_text(f"#!/bin/sh\necho x >> {counter}\nn=$(wc -l < {counter})\n"
                     "printf 'n%s ' $n; cat\n", encoding="utf-8")
    agent.chmod(0o755)
    done = run_cli("run", script, "--store", store, "--provider", "command", "--command",
               str(agent), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == ["n1 one", "n2 two n1 one", "n3 three n2 two n1 one"]
    return script, run_id_of(done.stderr)


def test_resume_uses_the_recorded_provider(tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite3"
    _, run_id = _chain_run(tmp_path, store)
    again = run_cli("resume", run_id, "--store", store, cwd=tmp_path)  # no --provider given
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout) == ["n1 one", "n2 two n1 one", "n3 three n2 two n1 one"]
    assert "3 replayed" in again.stderr and "warning:" not in again.stderr
    other = run_cli("resume", run_id, "--store", store, "--provider", "echo", cwd=tmp_path)
    assert other.returncode == 0, other.stderr
    warning = [line for line in other.stderr.splitlines() if line.startswith("warning:")]
    assert len(warning) == 1, other.stderr
    assert "'echo'" in warning[0] and "agent.sh" in warning[0]
    assert "its 3 completed calls will run live" in warning[0]
    assert json.loads(other.stdout)[0] == "echo: one"


def test_resume_rerun_runs_the_named_calls_live(tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite3"
    _, run_id = _chain_run(tmp_path, store)
    again = run_cli("resume", run_id, "--rerun", "2", "--store", store, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    # the second call ran live (a new number), the third depends on it, the first replayed
    assert json.loads(again.stdout) == ["n1 one", "n4 two n1 one", "n5 three n4 two n1 one"]
    assert "1 replayed" in again.stderr
    odd = run_cli("resume", run_id, "--rerun", "3,7", "--store", store, cwd=tmp_path)
    assert odd.returncode == 0, odd.stderr
    assert "warning: --rerun 7:" in odd.stderr and "2 replayed" in odd.stderr
    bad = run_cli("resume", run_id, "--rerun", "two", "--store", store, cwd=tmp_path)
    assert bad.returncode == 2 and "--rerun" in bad.stderr


# -- replay-check ------------------------------------------------------------------------------


def _rows(store: Path) -> tuple[int, ...]:
    import sqlite3

    with sqlite3.connect(store) as conn:
        return tuple(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
                     for table in ("runs", "events", "journal", "calls"))


def test_replay_check_replays_fully_or_names_the_first_divergence(tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite3"
    _, run_id = _chain_run(tmp_path, store)
    spent = (tmp_path / "count").read_text()
    before = _rows(store)
    full = run_cli("replay-check", run_id, "--store", store, cwd=tmp_path)
    assert full.returncode == 0, full.stderr
    assert full.stdout.strip() == "replays fully (3 calls)"
    edited = write(tmp_path, "edited.js", CHAIN.replace("'two ' + a", "'deux ' + a"))
    diverged = run_cli("replay-check", run_id, "--script", edited, "--store", store, cwd=tmp_path)
    assert diverged.returncode == 1, diverged.stderr
    lines = diverged.stdout.splitlines()
    assert lines[0] == "diverges at agent() call 2 (second): no journal entry for its key"
    assert lines[1] == "the prompts first differ at character 1:"
    assert lines[2] == "  recorded: 'two n1 one'" and lines[3] == "  new:      'deux n1 one'"
    assert "Traceback" not in diverged.stderr
    options = write(tmp_path, "options.js",
                    CHAIN.replace("{label: 'third'}", "{label: 'third', effort: 'high'}"))
    differs = run_cli("replay-check", run_id, "--script", options, "--store", store, cwd=tmp_path)
    assert differs.returncode == 1
    assert "call 3 (third)" in differs.stdout and "effort" in differs.stdout
    args = run_cli("replay-check", run_id, "--args", '{"x": 1}', "--store", store, cwd=tmp_path)
    assert args.returncode == 0, args.stderr  # the script ignores its args
    # nothing recorded, nothing spent
    assert _rows(store) == before
    assert (tmp_path / "count").read_text() == spent
    assert run_cli("replay-check", "nope", "--store", store, cwd=tmp_path).returncode == 2


def test_replay_check_and_resume_replay_parallel_schema_calls(tmp_path: Path) -> None:
    """The README's example: parallel calls with a schema. Each command is a new process, so
    the schema's verdict is not cached there; both commands must finish (they once hung)."""
    store = tmp_path / "runs.sqlite3"
    script = write(tmp_path, "review.js", HEADER + """
phase('Review');
const reviews = await parallel(args.files.map(file => () =>
  agent(`Review ${file} for bugs.`, {label: `review ${file}`, schema: {
    type: 'object', properties: {findings: {type: 'array', items: {type: 'string'}}},
    required: ['findings']}})));
return reviews.map(r => r.findings.length);
""")
    done = run_cli("run", script, "--store", store, "--args", '{"files": ["a.py", "b.py"]}',
               cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    run_id = run_id_of(done.stderr)
    check = run_cli("replay-check", run_id[:8], "--store", store, cwd=tmp_path, timeout=30)
    assert (check.returncode, check.stdout.strip()) == (0, "replays fully (2 calls)"), check.stderr
    again = run_cli("resume", run_id[:8], "--store", store, cwd=tmp_path, timeout=30)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout) == json.loads(done.stdout)
    assert "2 replayed" in again.stderr, again.stderr


def test_resume_and_replay_check_keep_the_recorded_model_aliases(tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite3"
    script = write(tmp_path, "aliased.js", HEADER + """
return [await agent('a', {model: 'fast'}), await agent('b')];
""")
    done = run_cli("run", script, "--store", store, "--model-alias", "fast=model-f", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    run_id = run_id_of(done.stderr)
    again = run_cli("resume", run_id, "--store", store, cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "2 replayed" in again.stderr and "warning:" not in again.stderr
    check = run_cli("replay-check", run_id, "--store", store, cwd=tmp_path)
    assert check.stdout.strip() == "replays fully (2 calls)", check.stdout + check.stderr
    other = run_cli("replay-check", run_id, "--model-alias", "fast=model-g", "--store", store,
                cwd=tmp_path)
    assert other.returncode == 1 and "model (recorded 'model-f', new 'model-g')" in other.stdout


def test_show_agent_of_a_killed_run_says_interrupted(tmp_path: Path) -> None:
    import signal

    store = tmp_path / "runs.sqlite3"
    script = write(tmp_path, "slow.js", SLOW)
    marker = tmp_path / "child-started"
    child = tmp_path / "child.sh"
    child.write_text(f"#!/bin/sh\ntouch {marker}\nexec sleep 60\n", encoding="utf-8")
    child.chmod(0o755)
    err = tmp_path / "run.err"
    with err.open("wb") as err_file:
        running = subprocess.Popen(
            cli_command("run", str(script), "--store", str(store),
             "--provider", "command", "--command", str(child)), cwd=tmp_path, env=cli_env(),
            stdout=subprocess.DEVNULL, stderr=err_file, start_new_session=True)
    try:
        wait_until(marker.exists, what=f"the child's marker (stderr: {err})")
        wait_until(lambda: store_has_call(store, 1), what="the open call in the store")
    finally:
        os.killpg(running.pid, signal.SIGKILL)  # kill -9, its command child with it
        running.wait()
    run_id = re.search(UUID, err.read_text()).group(0)  # type: ignore[union-attr]  # printed at start
    shown = run_cli("show", run_id, "--agent", "1", "--store", store, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "outcome:     interrupted" in shown.stdout
    assert "wait for it" in shown.stdout and "no answer: the run ended without it" in shown.stdout


def test_replay_check_runs_saved_workflows_from_the_given_folders(tmp_path: Path) -> None:
    store = tmp_path / "runs.sqlite3"
    folder = tmp_path / "flows"
    folder.mkdir()
    write(folder, "inner.js", "export const meta = {name: 'inner', description: 'inner'};\n"
          "return await agent('inner ' + args.x);\n")
    script = write(tmp_path, "outer.js", HEADER + """
const r = await workflow('inner', {x: 1});
return [r, await agent('after ' + r)];
""")
    done = run_cli("run", script, "--store", store, "--workflows", folder, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    run_id = run_id_of(done.stderr)
    check = run_cli("replay-check", run_id, "--workflows", folder, "--store", store, cwd=tmp_path)
    assert check.stdout.strip() == "replays fully (2 calls)", check.stdout + check.stderr
    missing = run_cli("replay-check", run_id, "--store", store, cwd=tmp_path)
    assert missing.returncode == 1
    assert missing.stdout.startswith("does not replay: the script ended error")
    assert "workflow('inner')" in missing.stdout

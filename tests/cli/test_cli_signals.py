"""SIGTERM and SIGHUP to ``dsh-workflow run`` are handled like Ctrl-C (SPEC §18, §19): the
command children are killed, worktrees removed, the run recorded ``cancelled`` and the resume
hint printed. Real processes, a real store, a real git repository."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from _support import (
    alive,
    cli_command,
    cli_env,
    wait_for_output,
    wait_until,
    wait_while_running,
    written_files,
)

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

META = "export const meta = { name: 'signals', description: 'a run stopped by a signal' };\n"
# The agent command: records its pid and working directory, then sleeps far past the test.
AGENT = """\
import os, pathlib, sys, time
folder = pathlib.Path(sys.argv[1])
(folder / str(os.getpid())).write_text(os.getcwd())
time.sleep(120)
"""
SIGNALS = [pytest.param(signal.SIGTERM, id="SIGTERM"), pytest.param(signal.SIGHUP, id="SIGHUP")]


def env_for(tmp: Path) -> dict[str, str]:
    return cli_env(TMPDIR=str(tmp))  # where isolated children's worktrees are made


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True,
                          text=True).stdout


def make_repo(root: Path) -> Path:
    repo = root / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "config", "user.name", "dev")
    git(repo, "config", "user.email", "dev@localhost")
    (repo / "tracked.txt").write_text("committed\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "first")
    return repo


def wait_started(process: subprocess.Popen[bytes], pids_dir: Path, children: int,
                 err: Path) -> None:
    """Wait until ``children`` agents wrote their working directories into ``pids_dir`` (a
    file named by each one's pid); fails at once, with its stderr (the file ``err``), if
    ``process`` exits first."""
    wait_while_running(process, lambda: len(written_files(pids_dir)) >= children,
                       what=f"{children} agents to start", timeout=30, output=err)


def stop_run(tmp_path: Path, cwd: Path, script: str, how: signal.Signals,
             children: int) -> tuple[subprocess.Popen[bytes], bytes, str, list[int], Path]:
    """Start ``run`` with the sleeping agent command, wait until ``children`` agents run,
    send ``how``; returns the process, its stdout, its stderr, the children's pids and the
    store."""
    pids_dir = tmp_path / "pids"
    pids_dir.mkdir()
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT, encoding="utf-8")
    body = tmp_path / "s.js"
    body.write_text(META + script, encoding="utf-8")
    store = tmp_path / "store" / "runs.sqlite3"
    err = tmp_path / "stderr.txt"
    command = f"{sys.executable} {agent} {pids_dir}"
    with err.open("wb") as err_file:
        process = subprocess.Popen(
            cli_command("run", str(body), "--provider", "command",
             "--command", command, "--store", str(store)),
            cwd=cwd, env=env_for(tmp_path), stdout=subprocess.PIPE, stderr=err_file)
    pids: list[int] = []
    try:
        wait_started(process, pids_dir, children, err)
        pids = [int(p.name) for p in pids_dir.iterdir()]
        process.send_signal(how)
        stdout, _ = process.communicate(timeout=30)
    finally:
        process.kill()
        process.wait()
    stderr = err.read_text(encoding="utf-8")
    return process, stdout, stderr, pids, store


def cleanup(pids: list[int]) -> None:
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def assert_cancelled_and_recorded(process: subprocess.Popen[bytes], stdout: bytes, stderr: str,
                                  store: Path, cwd: Path) -> None:
    assert process.returncode == 130, stderr
    assert "Traceback" not in stderr
    result: dict[str, Any] = json.loads(stdout)
    assert result["stop_reason"] == "cancelled", result
    run_id = result["run_id"]
    hint = re.search(r"^Resume it with: (.+)$", stderr, re.MULTILINE)
    assert hint, stderr
    assert f"dsh-workflow resume {run_id}" in hint.group(1)
    listed = subprocess.run(cli_command("runs", "--json", "--store",
                             str(store)), cwd=cwd, env=env_for(cwd), capture_output=True,
                            text=True, timeout=60)
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert [(row["run_id"] if "run_id" in row else row["id"], row["status"]) for row in rows] \
        == [(run_id, "cancelled")], rows


def wait_gone(pids: list[int], what: str) -> None:
    """Wait until none of ``pids`` runs; fails after 5 s naming ``what`` was awaited."""
    wait_until(lambda: not [pid for pid in pids if alive(pid)], what=what, timeout=5)


@pytest.mark.parametrize("how", SIGNALS)
def test_a_signal_kills_the_command_children_and_records_the_run_cancelled(
        tmp_path: Path, how: signal.Signals) -> None:
    script = "return await parallel([() => agent('a'), () => agent('b')]);\n"
    process, stdout, stderr, pids, store = stop_run(tmp_path, tmp_path, script, how, children=2)
    try:
        assert len(pids) == 2
        wait_gone(pids, "the command children to end with the run")
        assert_cancelled_and_recorded(process, stdout, stderr, store, tmp_path)
        assert f"{how.name}" in json.loads(stdout)["error"]
    finally:
        cleanup(pids)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_sigterm_removes_the_worktrees_of_isolated_children(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    script = "return await agent('edit', { isolation: 'worktree' });\n"
    process, stdout, stderr, pids, store = stop_run(tmp_path, repo, script, signal.SIGTERM,
                                                    children=1)
    try:
        worktree = Path((tmp_path / "pids" / str(pids[0])).read_text())
        assert worktree != repo and worktree.is_relative_to(tmp_path.resolve()), worktree
        wait_gone(pids, "the agent to end with the run")
        assert_cancelled_and_recorded(process, stdout, stderr, store, repo)
        assert not worktree.exists(), "the worktree was left behind"
        listed = git(repo, "worktree", "list", "--porcelain")
        assert [line for line in listed.splitlines() if line.startswith("worktree ")] \
            == [f"worktree {repo.resolve()}"]
    finally:
        cleanup(pids)


def start_run(tmp_path: Path, script: str, command: str, children: int,
              extra: tuple[str, ...] = (), cwd: Path | None = None,
              ) -> tuple[subprocess.Popen[bytes], list[int], Path]:
    """Start ``run`` with ``command`` as the agent (``{agent}`` and ``{pids}`` filled in) and
    wait until ``children`` agents wrote their pids; returns the process, the pids and the
    stderr file."""
    pids_dir = tmp_path / "pids"
    pids_dir.mkdir()
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT, encoding="utf-8")
    body = tmp_path / "s.js"
    body.write_text(META + script, encoding="utf-8")
    err = tmp_path / "stderr.txt"
    with err.open("wb") as err_file:
        process = subprocess.Popen(
            cli_command("run", str(body), "--provider", "command",
             "--command", command.format(agent=agent, pids=pids_dir), *extra),
            cwd=cwd or tmp_path, env=env_for(tmp_path), stdout=subprocess.DEVNULL,
            stderr=err_file)
    try:
        wait_started(process, pids_dir, children, err)
    except BaseException:
        process.kill()
        process.wait()
        raise
    return process, [int(p.name) for p in pids_dir.iterdir()], err


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_sigkill_of_the_runner_kills_its_command_children(tmp_path: Path) -> None:
    """``kill -9`` of ``run`` leaves no command child running: the children run in their own
    sessions, so only the watcher that outlives the runner can end them — grandchildren too
    (the agent runs under a shell that waits for it)."""
    script = "return await parallel([() => agent('a'), () => agent('b')]);\n"
    command = f"sh -c '{sys.executable} {{agent}} {{pids}}; true'"
    process, pids, _ = start_run(tmp_path, script, command, children=2)
    try:
        assert len(pids) == 2 and all(alive(pid) for pid in pids)
        process.kill()
        process.wait()
        wait_gone(pids, "the command children to end with the killed runner")
    finally:
        cleanup(pids)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_second_ctrl_c_kills_the_command_children_before_exiting(tmp_path: Path) -> None:
    """Two SIGINTs in a row: the process may exit at once, but its command children are dead
    and their worktrees removed by the time it has exited (nothing waited for afterwards)."""
    repo = make_repo(tmp_path)
    script = ("return await parallel([() => agent('a', { isolation: 'worktree' }), "
              "() => agent('b', { isolation: 'worktree' })]);\n")
    # The agent ignores SIGTERM, so the first Ctrl-C's cancel cannot end it within its grace.
    command = (f"{sys.executable} -c \"import signal, runpy, sys; "
               f"signal.signal(signal.SIGTERM, signal.SIG_IGN); sys.argv = sys.argv[1:]; "
               f"runpy.run_path(sys.argv[0], run_name='__main__')\" {{agent}} {{pids}}")
    process, pids, err = start_run(tmp_path, script, command, children=2, cwd=repo)
    try:
        worktrees = [Path((tmp_path / "pids" / str(pid)).read_text()) for pid in pids]
        assert all(w.is_relative_to(tmp_path.resolve()) and w != repo for w in worktrees)
        process.send_signal(signal.SIGINT)
        wait_for_output(err, "press Ctrl-C again")  # the first one is being handled
        process.send_signal(signal.SIGINT)
        process.communicate(timeout=30)
        assert process.returncode == 130, err.read_text()
        assert "interrupted twice" in err.read_text()
        assert [pid for pid in pids if alive(pid)] == [], \
            "the command children were still running when the process exited"
        assert [w for w in worktrees if w.exists()] == [], "worktrees were left behind"
        listed = git(repo, "worktree", "list", "--porcelain")
        assert [line for line in listed.splitlines() if line.startswith("worktree ")] \
            == [f"worktree {repo.resolve()}"]
    finally:
        process.kill()
        process.wait()
        cleanup(pids)

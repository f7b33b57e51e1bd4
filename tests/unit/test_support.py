"""The test suite's own helpers (``tests/_support.py``): the CLI's environment and the waits."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from _support import (
    REPO,
    alive,
    await_none_left,
    await_until,
    cli_env,
    wait_until,
    wait_while_running,
    written_files,
)


def test_cli_env_drops_what_steers_the_cli_and_sets_what_is_asked(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("DSH_WORKFLOW_STORE", "/elsewhere.sqlite3")
    monkeypatch.setenv("COLUMNS", "40")
    monkeypatch.setenv("CLAUDE_X", "1")
    env = cli_env(store=REPO / "s.sqlite3", home=REPO, drop_prefixes=("CLAUDE_",), EXTRA="1",
                  TERM=None)
    assert "OPENAI_API_KEY" not in env and "COLUMNS" not in env and "CLAUDE_X" not in env
    assert env["DSH_WORKFLOW_STORE"] == str(REPO / "s.sqlite3")
    assert env["HOME"] == str(REPO) and env["EXTRA"] == "1" and "TERM" not in env
    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(REPO)
    assert os.environ["OPENAI_API_KEY"] == "sk-test", "the test's own environment is untouched"


def test_wait_until_returns_the_first_truthy_value() -> None:
    counter = itertools.count()
    assert wait_until(lambda: next(counter) >= 3 and "done", what="three looks", interval=0) \
        == "done"


def test_wait_until_names_what_it_waited_for_at_its_deadline() -> None:
    began = time.monotonic()
    with pytest.raises(AssertionError, match=r"waited 0.05 s for the marker file; last seen: 0"):
        wait_until(lambda: 0, what="the marker file", timeout=0.05)
    assert time.monotonic() - began >= 0.05


@pytest.mark.anyio
async def test_await_until_lets_the_loop_run_while_it_waits() -> None:
    flag: list[int] = []

    async def set_later() -> None:
        await anyio.sleep(0.02)
        flag.append(1)

    async with anyio.create_task_group() as tg:
        tg.start_soon(set_later)
        assert await await_until(lambda: len(flag), what="the flag", timeout=5) == 1
    with pytest.raises(AssertionError, match="the flag"):
        await await_until(lambda: False, what="the flag", timeout=0.02)


@pytest.mark.anyio
async def test_await_none_left_names_what_was_left() -> None:
    left = {"b", "a"}

    async def end_later() -> None:
        await anyio.sleep(0.02)
        left.clear()

    async with anyio.create_task_group() as tg:
        tg.start_soon(end_later)
        await await_none_left(lambda: set(left), what="the threads to end", timeout=5)
    with pytest.raises(AssertionError,
                       match=r"waited 0.02 s for the pids to end; last seen: \['7'\]"):
        await await_none_left(lambda: {7}, what="the pids to end", timeout=0.02)


def test_wait_while_running_fails_at_once_when_the_process_exits_first(tmp_path: Path) -> None:
    output = tmp_path / "err"
    output.write_text("boom: no listener\n")
    quick = subprocess.Popen([sys.executable, "-c", "pass"])
    quick.wait()
    began = time.monotonic()
    with pytest.raises(AssertionError, match=r"exited \(0\) before the port.*boom: no listener"):
        wait_while_running(quick, lambda: False, what="the port", timeout=30, output=output)
    assert time.monotonic() - began < 5  # not the 30 s timeout

    marker = tmp_path / "marker"
    writer = subprocess.Popen([sys.executable, "-c",
                               f"import pathlib; pathlib.Path({str(marker)!r}).write_text('x')"])
    writer.wait()  # exited, having brought the condition about: that is no failure
    assert wait_while_running(writer, marker.exists, what="the marker", timeout=5) is True


def test_written_files_leave_out_empty_ones_and_alive_sees_exits(tmp_path: Path) -> None:
    (tmp_path / "1").write_text("")
    (tmp_path / "2").write_text("/work")
    assert written_files(tmp_path) == [tmp_path / "2"]
    assert alive(os.getpid())
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    assert not alive(ended.pid)

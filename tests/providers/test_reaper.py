"""The watcher that ends a dead runner's command children (``_providers/reaper.py``): real
processes, a real SIGKILL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from _support import alive, wait_until

from dsh_workflow._providers import reaper

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

RUNNER = """\
import os, signal, subprocess, sys
from dsh_workflow._providers import reaper
child = subprocess.Popen(["sh", "-c", "sleep 60; true"], start_new_session=True)
reaper.watch(child.pid)
grandchild = ""
while not grandchild:
    try:
        grandchild = open(f"/proc/{child.pid}/task/{child.pid}/children").read().strip()
    except OSError:
        pass
print(child.pid, grandchild, flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_runner_killed_outright_takes_its_childrens_groups_with_it() -> None:
    runner = subprocess.run([sys.executable, "-c", RUNNER], capture_output=True, text=True,
                            timeout=60)
    assert runner.returncode == -signal.SIGKILL, runner.stderr
    pids = [int(pid) for pid in runner.stdout.split()]
    assert len(pids) == 2, runner.stdout
    try:
        wait_until(lambda: not any(alive(pid) for pid in pids),
                   what=f"the child and its own child {pids} to die with the killed runner",
                   timeout=5)
    finally:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


def test_the_watcher_lives_only_while_a_group_is_registered() -> None:
    first = subprocess.Popen(["sleep", "60"], start_new_session=True)
    second = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        reaper.watch(first.pid)
        reaper.watch(second.pid)
        watcher = reaper.watcher_pid()
        assert watcher is not None and alive(watcher)
        first.kill()
        first.wait()
        assert reaper.release(first.pid) is None  # one group is still registered
        assert reaper.watcher_pid() == watcher
        second.kill()
        second.wait()
        done = reaper.release(second.pid)
        assert done is not None and done.pid == watcher
        reaper.reap(done)
        assert done.returncode == 0 and reaper.watcher_pid() is None
    finally:
        for child in (first, second):
            child.kill()
            child.wait()


def test_kill_all_ends_every_registered_group_at_once() -> None:
    child = subprocess.Popen(["sh", "-c", "sleep 60; true"], start_new_session=True)
    try:
        reaper.watch(child.pid)
        reaper.kill_all()
        assert child.wait(timeout=5) == -signal.SIGKILL
    finally:
        child.kill()
        child.wait()
        reaper.reap(reaper.release(child.pid))

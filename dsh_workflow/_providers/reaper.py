"""The runner's death ends its children: a small watcher process kills the process groups of
the command children a runner leaves behind when it dies without cleaning up (``kill -9``).

A command child runs in its own session (``procgroup.py``), so neither a terminal's signals nor
the runner's exit reach it. While at least one such group is registered here (:func:`watch`),
this process keeps one **watcher**: ``python -I -S`` running this very file (standard library
only, nothing of the package is imported there), in its own session, holding the read end of a
pipe whose only write end this process holds. Registrations travel down that pipe as lines
(``+PGID``, ``-PGID``). When the write end closes, the watcher SIGKILLs every group still
registered and exits:

* the runner died, however (the kernel closes its descriptors): what it started dies too;
* the last group was released (:func:`release`): nothing is registered, so nothing is killed,
  and the watcher is reaped, so none is left once no child runs.

:func:`kill_all` SIGKILLs every registered group at once, synchronously, for a runner about to
exit without waiting for its runs (a second Ctrl-C).

Promises: never raises into its caller (a watcher that cannot start leaves the children as
they were before: still killed by the run's own cleanup); the pipe is not inherited by any
child (Python's descriptors are non-inheritable), so only the runner's death closes it. A
child killed in the instant between its start and :func:`watch` is the one case not covered.
POSIX only; elsewhere every function is a no-op.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading

__all__ = ["kill_all", "release", "watch", "watcher_pid"]

_lock = threading.Lock()
_groups: dict[int, int] = {}  # pgid -> how many registrations hold it
_watcher: subprocess.Popen[bytes] | None = None
_POSIX = os.name == "posix"


def watch(pgid: int) -> None:
    """Register ``pgid`` (a command child's group): it is SIGKILLed if this process dies."""
    if not _POSIX:
        return
    global _watcher
    with _lock:
        _groups[pgid] = _groups.get(pgid, 0) + 1
        if _watcher is None:
            _watcher = _start_watcher()
        _send(f"+{pgid}\n")


def release(pgid: int) -> subprocess.Popen[bytes] | None:
    """Unregister ``pgid`` once its group is gone. Returns the watcher to reap when this was
    the last group (its pipe is closed, so it exits at once; the caller waits for it off the
    event loop: :func:`reap`), else None."""
    if not _POSIX:
        return None
    global _watcher
    with _lock:
        held = _groups.get(pgid, 0) - 1
        if held > 0:
            _groups[pgid] = held
            return None
        _groups.pop(pgid, None)
        _send(f"-{pgid}\n")
        if _groups or _watcher is None:
            return None
        done, _watcher = _watcher, None
    _close(done)
    return done


def reap(watcher: subprocess.Popen[bytes] | None) -> None:
    """Wait for a watcher :func:`release` let go of (blocking: call it in a worker thread)."""
    if watcher is None:
        return
    try:
        watcher.wait(timeout=10)
    except subprocess.TimeoutExpired:
        watcher.kill()
        watcher.wait()


def kill_all() -> None:
    """SIGKILL every registered group now (synchronous; for a process about to exit)."""
    with _lock:
        groups = list(_groups)
    for pgid in groups:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except OSError:  # gone already, or not ours to signal
            pass


def watcher_pid() -> int | None:
    """The current watcher's pid (None when no group is registered); for diagnostics."""
    with _lock:
        return None if _watcher is None else _watcher.pid


def _start_watcher() -> subprocess.Popen[bytes] | None:
    try:
        return subprocess.Popen(
            [sys.executable, "-I", "-S", os.path.abspath(__file__)], stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
            close_fds=True)
    except OSError:
        return None


def _send(line: str) -> None:
    # Called with the lock held. A registration is a few bytes: the pipe never fills, since the
    # watcher reads as it goes; a watcher that is gone makes the write fail, which changes
    # nothing for the runner.
    if _watcher is None or _watcher.stdin is None:
        return
    try:
        _watcher.stdin.write(line.encode("ascii"))
        _watcher.stdin.flush()
    except (OSError, ValueError):  # a watcher that died, or a pipe already closed
        pass


def _close(watcher: subprocess.Popen[bytes] | None) -> None:
    if watcher is not None and watcher.stdin is not None:
        try:
            watcher.stdin.close()
        except OSError:
            pass


def _serve() -> None:  # pragma: no cover - runs in the watcher process
    """The watcher: read registrations until end of input, then SIGKILL what is left."""
    for signum in (signal.SIGINT, signal.SIGHUP, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)
    groups: set[int] = set()
    pending = b""
    while True:
        try:
            chunk = os.read(0, 4096)
        except InterruptedError:
            continue
        except OSError:
            break
        if not chunk:
            break
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            if line[:1] == b"+":
                groups.add(int(line[1:]))
            elif line[:1] == b"-":
                groups.discard(int(line[1:]))
    for pgid in groups:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except OSError:
            pass


if __name__ == "__main__":  # pragma: no cover - the watcher process
    _serve()

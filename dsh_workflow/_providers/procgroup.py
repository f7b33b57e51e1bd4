"""Process groups of the children the providers start (POSIX): signal, probe, terminate.

A child started with ``start_new_session=True`` leads its own process group, whose id is the
child's pid; that id cannot be reused while any member of the group exists, so signalling the
group after the leader exited still reaches only what the child left behind.
"""

from __future__ import annotations

import os
import signal
import sys

import anyio
import anyio.abc

__all__ = ["group_alive", "signal_group", "terminate_group"]


def signal_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to the group; False when no process of the group is left."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        # A member we may not signal (it changed its credentials): nothing more we can do.
        return False
    return True


def group_alive(pgid: int) -> bool:
    """Whether the group has a member that is not a zombie.

    Orphans are reparented to PID 1, which in some containers never reaps them; a zombie still
    counts for ``killpg`` but is dead, so on Linux ``/proc`` decides.
    """
    if not signal_group(pgid, 0):
        return False
    if not sys.platform.startswith("linux"):
        return True
    try:
        entries = [entry.name for entry in os.scandir("/proc") if entry.name.isdigit()]
    except OSError:
        return True
    for name in entries:
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rpartition(b")")[2].split()
        except OSError:
            continue  # gone meanwhile
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            return True
    return False


async def terminate_group(process: anyio.abc.Process, grace_s: float) -> None:
    """SIGTERM the child's process group, SIGKILL it after ``grace_s``, and reap the child.

    Returns at once when no live process is left in the group. The child is the group leader
    (``start_new_session``), so the group id is its pid, which cannot be reused while any member
    of the group exists.
    """
    pgid = process.pid
    if not group_alive(pgid):
        return
    signal_group(pgid, signal.SIGTERM)
    with anyio.move_on_after(grace_s):
        await process.wait()
        while group_alive(pgid):  # noqa: ASYNC110 - a group's end has no event to wait on
            await anyio.sleep(0.02)
    if group_alive(pgid):
        signal_group(pgid, signal.SIGKILL)
    await process.wait()
    with anyio.move_on_after(1.0):  # SIGKILL is delivered asynchronously; let it land
        while group_alive(pgid):  # noqa: ASYNC110 - a group's end has no event to wait on
            await anyio.sleep(0.01)

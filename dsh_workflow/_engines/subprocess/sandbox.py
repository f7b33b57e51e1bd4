"""How a sandbox process is started, and exactly what it is confined by.

Enforced (Linux; the parent builds the command, the child applies the rest to itself before it
reads any script):

* **Environment**: empty (``env={}``). Nothing of the host's environment (keys, tokens, proxy
  settings) exists in the process; the interpreter runs with ``-I -S -B`` (isolated mode, no
  ``site``, no ``.pyc`` writes), and the paths it needs to import this package and the QuickJS
  binding come in through argv.
* **Descriptors**: only its three pipes (stdin, stdout, stderr); ``close_fds`` drops the rest.
  After start-up ``RLIMIT_NOFILE`` is lowered to 3, so the process cannot open anything new —
  no file, socket, pipe or epoll/eventfd — as every descriptor number below the limit is taken.
* **Working directory**: a fresh, empty, private (0700) temporary directory, removed once the
  process has been reaped. ``start_new_session`` puts it in its own session, so a terminal's
  Ctrl-C reaches the engine (which cancels runs cleanly), not the sandbox.
* **Resource limits** (``setrlimit``, before any script is read): ``RLIMIT_AS`` = a measured
  base for Python + QuickJS + :attr:`SandboxPolicy.boundary_copies` × ``memory_limit_bytes``
  (the JavaScript heap itself is capped exactly by QuickJS; the rest covers the copies a value
  makes while it crosses to the parent); ``RLIMIT_CPU`` = a whole-process CPU backstop
  (:func:`cpu_backstop_s`; SIGXCPU, then SIGKILL); ``RLIMIT_FSIZE`` = 0 (no file can be
  written); ``RLIMIT_CORE`` = 0; and once its threads exist, ``RLIMIT_NPROC`` = 0 (no new
  process or thread; not enforced for a process that still has root's capabilities).
  glibc is told to keep a single malloc arena so that threads do not reserve address space.
* **Privileges**: when the engine runs as root, the child drops to ``nobody`` (uid/gid 65534, no
  supplementary groups) after importing what it needs, which also makes it undumpable and
  unattachable by other processes; ``prctl(PR_SET_NO_NEW_PRIVS)`` (no set-uid or file-capability
  gain through ``execve``); ``prctl(PR_SET_PDEATHSIG)`` with a handler that exits as soon as
  the engine *process* is gone (and end of stdin stops the script too), so a killed engine
  leaves no sandbox behind.
* **System calls** (x86-64 Linux): a seccomp-BPF filter on every thread, installed without
  privilege thanks to no-new-privs, answers EPERM to ``execve``/``execveat``, ``fork``/``vfork``
  and ``clone`` without ``CLONE_THREAD``, ``ptrace``, ``process_vm_readv``/``writev``,
  every socket call, ``unshare``/``setns``/``mount``/``chroot``/``pivot_root``, keyrings,
  ``bpf``, ``perf_event_open``, ``userfaultfd``, ``io_uring_setup`` and handle-based opens, and
  to ``kill``/``tgkill``/``tkill`` aimed at any other process; any non-native syscall ABI (i386,
  x32) kills the process. The ready frame lists every protection that was applied.
* **Supervision by the parent** (``watchdog.py`` decides, ``process.py`` measures): a stretch
  of script that uses more than ``2 × slice_cpu_limit_s + 0.5`` CPU seconds (read from
  ``/proc``) or a busy process that makes no CPU progress for
  :attr:`SandboxPolicy.hang_after_s` is killed; a stop or a finished run is followed by SIGKILL
  after :attr:`SandboxPolicy.stop_grace_s`; every process is reaped.

Not enforced — be aware:

* no namespaces (network, mount, pid, user), no chroot, no cgroup, and the seccomp filter is a
  deny-list, not an allow-list: a script that escaped QuickJS would run as ordinary code of its
  uid with the limits above. It could not open a file or socket (no free descriptor, and no
  socket call), start or replace a program, nor signal or trace another process, but it could
  read what is already mapped into its own memory and use every syscall not listed above (for
  example ``mmap``, ``futex``, ``getdents64`` on descriptors it already holds — only its pipes);
* ``RLIMIT_AS`` bounds virtual memory, not resident memory; the limits are per process, so many
  concurrent runs use many times these amounts; ``RLIMIT_NPROC`` is not enforced for a child
  that keeps root (``SandboxPolicy(drop_to_uid=None)``), and such a child could raise its own
  limits again;
* other architectures get no seccomp filter; on other POSIX systems the ``prctl`` calls, the
  filter and ``/proc`` CPU supervision are skipped, limits the kernel refuses are skipped, and a
  busy process is killed only after :attr:`SandboxPolicy.hang_after_s` + ``4 × slice`` of wall
  time; Windows is not supported.

The child applies its part through ``confine.py`` (which stays cheap to import); this module is
the parent's: it builds the command and computes the limits.
"""

from __future__ import annotations

import json
import math
import os
import sys
import tempfile
from dataclasses import dataclass
from typing import Any

from . import frames

__all__ = [
    "SandboxPolicy",
    "address_space_limit",
    "child_spec",
    "command",
    "cpu_backstop_s",
    "make_workdir",
    "process_cpu_seconds",
]

_MIB = 1024 * 1024
_NOBODY = 65534

#: Address space a prepared sandbox process reserves before any script runs: Python, the
#: QuickJS binding, the runtime and three thread stacks (measured: 34-36 MiB on x86-64 Linux with
#: one malloc arena), plus headroom for the interpreter's own allocations while serving a run.
BASE_ADDRESS_SPACE = 96 * _MIB


@dataclass(frozen=True)
class SandboxPolicy:
    """How sandbox processes are confined and supervised (defaults suit production).

    ``stop_grace_s``: after a stop (or the end frame) the process is SIGKILLed if it has not
    exited within this many seconds (at most half of ``dispose_grace_s``).
    ``hang_after_s``: a process that is busy with the script but makes no CPU progress for this
    long is killed as hung. ``cpu_backstop_s``: ``RLIMIT_CPU`` of the whole process; None
    derives it from the slice limit (:func:`cpu_backstop_s`). ``boundary_copies``: how many
    times ``memory_limit_bytes`` the address-space limit adds to :data:`BASE_ADDRESS_SPACE`.
    ``drop_to_uid``: the uid/gid a child started by root switches to (None keeps root).
    """

    stop_grace_s: float = 0.25
    hang_after_s: float = 10.0
    cpu_backstop_s: float | None = None
    boundary_copies: int = 4
    drop_to_uid: int | None = _NOBODY

    def __post_init__(self) -> None:
        if not (self.stop_grace_s >= 0 and self.hang_after_s > 0 and self.boundary_copies >= 1):
            raise ValueError("SandboxPolicy: stop_grace_s >= 0, hang_after_s > 0 and "
                             "boundary_copies >= 1 are required")
        if self.cpu_backstop_s is not None and self.cpu_backstop_s < 1:
            raise ValueError("SandboxPolicy: cpu_backstop_s must be at least 1 second")


def address_space_limit(memory_limit_bytes: int, policy: SandboxPolicy) -> int:
    """``RLIMIT_AS`` for a child whose JavaScript heap is capped at ``memory_limit_bytes``."""
    return BASE_ADDRESS_SPACE + policy.boundary_copies * memory_limit_bytes


def cpu_backstop_s(slice_cpu_limit_s: float, policy: SandboxPolicy) -> int:
    """``RLIMIT_CPU`` (whole seconds): the policy's value, else ``max(300, 60 × slice)``.

    It caps the CPU time of a whole run, far above what the per-stretch limit lets an honest
    script use in practice; it exists for a process that escaped every other control.
    """
    value = policy.cpu_backstop_s
    if value is None:
        value = max(300.0, 60.0 * slice_cpu_limit_s)
    return math.ceil(value)


def _import_root(module_file: str, dotted: str) -> str:
    """The sys.path entry that ``module_file`` (of module ``dotted``) was imported from."""
    path = os.path.dirname(os.path.abspath(module_file))
    if os.path.basename(module_file).startswith("__init__."):
        path = os.path.dirname(path)
    for _ in range(dotted.count(".")):
        path = os.path.dirname(path)
    return path


def child_spec(config: dict[str, Any], policy: SandboxPolicy) -> dict[str, Any]:
    """The JSON the child receives in argv: import paths, engine settings and its limits."""
    import _quickjs  # the binding's extension module
    import quickjs

    # this file is dsh_workflow/_engines/subprocess/sandbox.py
    package = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    paths = [os.path.dirname(package), _import_root(quickjs.__file__, "quickjs"),
             _import_root(_quickjs.__file__, "_quickjs")]
    as_limit = address_space_limit(int(config["memory_limit_bytes"]), policy)
    return {
        "version": frames.VERSION,
        "package": package,
        "paths": list(dict.fromkeys(paths)),
        "config": config,
        "limits": {
            "address_space": as_limit,
            "cpu": cpu_backstop_s(float(config["slice_cpu_limit_s"]), policy),
            "uid": policy.drop_to_uid if os.geteuid() == 0 else None,
        },
    }


_BOOT = (
    "import sys, json, importlib.util as u\n"
    "s = json.loads(sys.argv[1])\n"
    "sys.path[:0] = s['paths']\n"
    # The package's __init__ would import the whole library (pydantic, httpx, ...): register
    # the package without running it, so the child loads only the runtime it needs.
    "p = s['package']\n"
    "m = u.module_from_spec(u.spec_from_file_location("
    "'dsh_workflow', p + '/__init__.py', submodule_search_locations=[p]))\n"
    "sys.modules['dsh_workflow'] = m\n"
    "from dsh_workflow._engines.subprocess.child import main\n"
    "main(s, int(sys.argv[2]))\n"
)


def command(spec: dict[str, Any]) -> list[str]:
    """The argv that starts a sandbox process for ``spec`` (this interpreter, isolated)."""
    return [sys.executable, "-I", "-S", "-B", "-c", _BOOT,
            json.dumps(spec, ensure_ascii=True), str(os.getpid())]


def make_workdir() -> str:
    """A fresh, empty, private directory to be the child's working directory."""
    return tempfile.mkdtemp(prefix="dsh-workflow-sandbox-")


def process_cpu_seconds(pid: int) -> float | None:
    """CPU seconds (user + system) process ``pid`` has used, from ``/proc``; None if unknown."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            data = handle.read()
    except OSError:
        return None
    fields = data[data.rfind(b")") + 2:].split()
    try:
        ticks = int(fields[11]) + int(fields[12])
    except (IndexError, ValueError):
        return None
    return ticks / _CLOCK_TICKS


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100

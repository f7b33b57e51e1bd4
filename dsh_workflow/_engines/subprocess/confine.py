"""The confinement a sandbox process applies to itself (``sandbox.py`` says what and why).

Imported by the child before anything else of substance, so it uses only cheap standard-library
modules (no ``ctypes.util``, no ``dataclasses``): every millisecond here is paid by every run
whose process was not started ahead of time.
"""

from __future__ import annotations

import ctypes
import errno
import os
import resource
import signal
import struct
import sys
from typing import Any

__all__ = ["confine_final", "confine_identity", "confine_resources", "confine_syscalls"]

_PR_SET_PDEATHSIG = 1
_PR_SET_NO_NEW_PRIVS = 38
_M_ARENA_MAX = -8


def _libc() -> Any:
    try:
        return ctypes.CDLL(None, use_errno=True)  # the symbols already loaded: libc
    except OSError:
        return None


def _prctl(libc: Any, option: int, arg: int) -> bool:
    if libc is None or not hasattr(libc, "prctl"):
        return False
    return bool(libc.prctl(option, arg, 0, 0, 0) == 0)


_LINUX = sys.platform.startswith("linux")


def _setrlimit(which: int, value: int, soft: int | None = None) -> bool:
    """Set a limit; on Linux a failure raises, elsewhere the limit is skipped (False)."""
    try:
        resource.setrlimit(which, (value if soft is None else soft, value))
    except (OSError, ValueError):
        if _LINUX:
            raise
        return False
    return True


def confine_resources(limits: dict[str, Any]) -> list[str]:
    """Child, first thing: memory, CPU, file-size, core and descriptor limits.

    Raises OSError/ValueError when a limit cannot be set (the child then dies before it reads
    any script, and its run ends as ``error``). Returns the protections applied.
    """
    applied = []
    libc = _libc()
    if libc is not None and hasattr(libc, "mallopt") and libc.mallopt(_M_ARENA_MAX, 1) == 1:
        applied.append("malloc-arena-max-1")
    cpu = int(limits["cpu"])
    for name, which, value, soft in (
            ("rlimit-as", resource.RLIMIT_AS, int(limits["address_space"]), None),
            ("rlimit-cpu", resource.RLIMIT_CPU, cpu + 5, cpu),  # SIGXCPU, then SIGKILL
            ("rlimit-fsize", resource.RLIMIT_FSIZE, 0, None),
            ("rlimit-core", resource.RLIMIT_CORE, 0, None),
            (None, resource.RLIMIT_NOFILE, 16, None)):  # imports still open files, one by one
        if _setrlimit(which, value, soft) and name is not None:
            applied.append(name)
    return applied


def confine_identity(limits: dict[str, Any], parent_pid: int) -> list[str]:
    """Child, after its imports: drop root, forbid privilege gain, exit with the engine.

    Must run on the main thread (it installs a signal handler).

    Raises OSError if the uid cannot be dropped (never continue as root by accident).
    """
    applied = []
    uid = limits.get("uid")
    if uid is not None and os.geteuid() == 0:
        os.setgroups([])
        os.setresgid(uid, uid, uid)
        os.setresuid(uid, uid, uid)
        if os.geteuid() != uid or os.getuid() != uid:  # pragma: no cover - kernel refused
            raise OSError(errno.EPERM, "could not drop root privileges")
        applied.append(f"uid-{uid}")
    libc = _libc()
    if _prctl(libc, _PR_SET_NO_NEW_PRIVS, 1):
        applied.append("no-new-privs")
    # The parent-death signal fires when the *thread* that started the process exits (trio
    # starts processes from worker threads that retire when idle), so it is a catchable signal
    # whose handler exits only once the engine *process* is gone. Armed after the uid change,
    # which would clear it.
    def parent_gone(signum: int, frame: object) -> None:
        if os.getppid() != parent_pid:
            os._exit(0)

    signal.signal(signal.SIGHUP, parent_gone)
    if _prctl(libc, _PR_SET_PDEATHSIG, signal.SIGHUP):
        applied.append("pdeathsig")
    if os.getppid() != parent_pid:  # the engine died before the signal was armed
        os._exit(0)
    return applied


def confine_final() -> list[str]:
    """Child, once its threads exist: no new descriptors, processes or threads, and the
    syscall filter (:func:`confine_syscalls`) on every thread."""
    applied = []
    if _setrlimit(resource.RLIMIT_NOFILE, 3):
        applied.append("rlimit-nofile-3")
    if hasattr(resource, "RLIMIT_NPROC") and _setrlimit(resource.RLIMIT_NPROC, 0):
        applied.append("rlimit-nproc-0")
    if confine_syscalls():
        applied.append("seccomp")
    return applied


# ---- seccomp ---------------------------------------------------------------------------------

_AUDIT_ARCH_X86_64 = 0xC000003E
_X32_SYSCALL_BIT = 0x40000000
_SECCOMP_SET_MODE_FILTER = 1
_SECCOMP_FILTER_FLAG_TSYNC = 1
_SYS_SECCOMP_X86_64 = 317
_RET_ALLOW = 0x7FFF0000
_RET_ERRNO = 0x00050000
_RET_KILL_PROCESS = 0x80000000
_LD_W_ABS, _JEQ_K, _JGE_K, _JSET_K, _RET_K = 0x20, 0x15, 0x35, 0x45, 0x06
_CLONE_THREAD = 0x00010000

#: x86-64 syscalls a script runtime never needs and an escaped script would want: starting
#: programs, debugging or reading other processes, networking, namespaces, mounts, keyrings,
#: kernel-attack surface (bpf, perf, userfaultfd, io_uring).
_DENIED_X86_64 = {
    "fork": 57, "vfork": 58, "execve": 59, "execveat": 322, "ptrace": 101,
    "process_vm_readv": 310, "process_vm_writev": 311, "tkill": 200,
    "socket": 41, "connect": 42, "accept": 43, "bind": 49, "listen": 50, "socketpair": 53,
    "accept4": 288, "unshare": 272, "setns": 308, "mount": 165, "umount2": 166,
    "pivot_root": 155, "chroot": 161, "add_key": 248, "request_key": 249, "keyctl": 250,
    "perf_event_open": 298, "bpf": 321, "userfaultfd": 323, "io_uring_setup": 425,
    "open_by_handle_at": 304, "name_to_handle_at": 303,
}
_SYS_KILL, _SYS_TGKILL, _SYS_CLONE, _SYS_CLONE3 = 62, 234, 56, 435


def _filter_x86_64(own_pid: int) -> list[tuple[int, int, int, int]]:
    """The BPF program: deny (EPERM) the syscalls above, signals to any other process and
    clone() without CLONE_THREAD; clone3 answers ENOSYS (glibc falls back to clone); any other
    syscall ABI (i386, x32) kills the process."""
    deny = _RET_ERRNO | errno.EPERM
    prog = [
        (_LD_W_ABS, 0, 0, 4),                        # A = arch
        (_JEQ_K, 1, 0, _AUDIT_ARCH_X86_64),
        (_RET_K, 0, 0, _RET_KILL_PROCESS),
        (_LD_W_ABS, 0, 0, 0),                        # A = syscall number
        (_JGE_K, 0, 1, _X32_SYSCALL_BIT),
        (_RET_K, 0, 0, _RET_KILL_PROCESS),
        (_JEQ_K, 0, 1, _SYS_CLONE3),
        (_RET_K, 0, 0, _RET_ERRNO | errno.ENOSYS),
    ]
    for number in sorted(_DENIED_X86_64.values()):
        prog += [(_JEQ_K, 0, 1, number), (_RET_K, 0, 0, deny)]
    for number in (_SYS_KILL, _SYS_TGKILL):          # only to this process itself
        prog += [(_JEQ_K, 0, 4, number), (_LD_W_ABS, 0, 0, 16),
                 (_JEQ_K, 0, 1, own_pid), (_RET_K, 0, 0, _RET_ALLOW), (_RET_K, 0, 0, deny)]
    prog += [(_JEQ_K, 0, 4, _SYS_CLONE), (_LD_W_ABS, 0, 0, 16),    # clone: threads only
             (_JSET_K, 0, 1, _CLONE_THREAD), (_RET_K, 0, 0, _RET_ALLOW), (_RET_K, 0, 0, deny)]
    prog.append((_RET_K, 0, 0, _RET_ALLOW))
    return prog


def confine_syscalls() -> bool:
    """Install the seccomp filter on every thread of this process (x86-64 Linux only; it needs
    no privilege once no-new-privs is set). Returns False where it is not available."""
    # os.uname(), not platform.machine(): the same answer on Linux, without importing platform
    # (about 130 KB of every sandbox process's memory).
    if not _LINUX or os.uname().machine != "x86_64":
        return False
    libc = _libc()
    if libc is None or not hasattr(libc, "syscall"):
        return False
    prog = _filter_x86_64(os.getpid())
    code = b"".join(struct.pack("=HBBI", *instruction) for instruction in prog)
    buffer = ctypes.create_string_buffer(code, len(code))

    class _Program(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    program = _Program(len(prog), ctypes.cast(buffer, ctypes.c_void_p))
    result = libc.syscall(ctypes.c_long(_SYS_SECCOMP_X86_64),
                          ctypes.c_ulong(_SECCOMP_SET_MODE_FILTER),
                          ctypes.c_ulong(_SECCOMP_FILTER_FLAG_TSYNC), ctypes.byref(program))
    return bool(result == 0)

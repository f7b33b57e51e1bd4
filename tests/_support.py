"""Test helpers shared by the attack, property and provider-fault suites.

- :func:`child_pids`: the processes this test process has not reaped yet.
- :func:`both_engines` and :data:`TIGHT_CONFIG`: the two engines as pytest params, and the
  tight limits of the suites that drive runs into their caps.
- :data:`ENGINE_FACTORIES`: every engine, built from ``(config, provider)``; an engine that
  cannot run here maps to ``None`` with the reason in :data:`ENGINE_SKIPS`.
- :func:`run_cli`, :func:`cli_command` and :func:`cli_env`: the one way a test runs the
  ``dsh-workflow`` command, as a real process of this checkout.
- :func:`wait_until` and :func:`await_until`: the one way a test waits for a condition it
  cannot be told about (a file, a process's state, a count of events), with a deadline;
  :func:`wait_while_running` waits for what a process it started is to bring about, and
  :func:`await_none_left` for leftovers to go; :func:`wait_for_output` (a pattern in a
  process's output file), :func:`store_has_call` (a call recorded in a run store),
  :func:`settled_run` (a run no longer ``running``), :func:`written_files` (what fake agents
  wrote), :func:`alive` (a process that has not exited) and :func:`wait_spinning` (a process
  burning CPU) are the conditions several folders wait for.

A test sleeps only where the sleep is the behaviour under test: a provider or a fake agent CLI
that is slow on purpose, a heartbeat that measures the event loop's lag, a cancel or a hold
at a chosen moment of a run, an event listener that holds the loop. Anything else a test
waits for, it waits for with the helpers here (or on an ``anyio.Event`` it can be given).
"""

from __future__ import annotations

import contextlib
import inspect
import os
import re
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Collection, Coroutine, Iterator, Mapping
from contextlib import AbstractAsyncContextManager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal, TypeVar, overload

import anyio

from dsh_workflow import (
    EngineConfig,
    QuickJSEngine,
    RunRecord,
    RunStore,
    WorkflowEngine,
)

__all__ = [
    "ENGINE_SKIPS",
    "REPO",
    "TIGHT_CONFIG",
    "EngineFactory",
    "alive",
    "await_none_left",
    "await_until",
    "both_engines",
    "child_pids",
    "cli_command",
    "cli_env",
    "local_http",
    "quickjs_factory",
    "run_beside_playwright",
    "run_cli",
    "send_json",
    "settled_run",
    "store_has_call",
    "subprocess_factory",
    "wait_for_output",
    "wait_spinning",
    "wait_until",
    "wait_while_running",
    "written_files",
]

T = TypeVar("T")

#: How often the wait helpers look again: often enough to add no noticeable latency, rarely
#: enough to cost nothing next to what the test waits for.
POLL_INTERVAL_S = 0.01

#: The checkout's root: the CLI processes tests start import the package from here.
REPO = Path(__file__).resolve().parents[1]

EngineFactory = Callable[[EngineConfig, Any], AbstractAsyncContextManager[WorkflowEngine]]


def quickjs_factory(config: EngineConfig,
                    provider: Any) -> AbstractAsyncContextManager[WorkflowEngine]:
    return QuickJSEngine(config, provider=provider)


ENGINE_SKIPS: dict[str, str] = {}


def subprocess_factory(pool_size: int) -> EngineFactory | None:
    """A SubprocessEngine factory, or None (reason in ENGINE_SKIPS) where it cannot run."""
    if not sys.platform.startswith("linux"):
        ENGINE_SKIPS["subprocess"] = "SubprocessEngine is checked on Linux only (/proc)"
        return None
    from dsh_workflow import SubprocessEngine

    def make(config: EngineConfig, provider: Any) -> AbstractAsyncContextManager[WorkflowEngine]:
        return SubprocessEngine(config, provider=provider, pool_size=pool_size)

    return make


#: Tight limits for suites that drive runs into their caps: a small heap and stack, a short
#: CPU slice and a short dispose grace.
TIGHT_CONFIG = EngineConfig(memory_limit_bytes=16 * 1024 * 1024, stack_limit_bytes=256 * 1024,
                            slice_cpu_limit_s=0.3, dispose_grace_s=0.5)


def both_engines() -> list[Any]:
    """pytest params of both engines' factories (ids ``quickjs``, ``subprocess``; the
    subprocess engine with a warm pool of one, skipped where it cannot run)."""
    import pytest

    sandboxed = subprocess_factory(pool_size=1)
    return [pytest.param(quickjs_factory, id="quickjs"),
            pytest.param(sandboxed, id="subprocess",
                         marks=pytest.mark.skipif(sandboxed is None, reason="Linux only"))]


def child_pids() -> set[int]:
    """Processes (zombies included) whose parent is this process (Linux; else empty)."""
    found: set[int] = set()
    if not sys.platform.startswith("linux"):
        return found
    me = str(os.getpid())
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    stat = handle.read()
            except OSError:
                continue
            if stat[stat.rfind(")") + 2:].split()[1] == me:
                found.add(int(entry))
    return found


#: Names of the test's own environment a CLI process does not inherit: what would steer it
#: from outside the test (provider keys, this project's settings, a terminal's width or colour).
_CLI_ENV_DROPPED_PREFIXES = ("OPENAI_", "DSH_WORKFLOW_")
_CLI_ENV_DROPPED = ("COLUMNS", "FORCE_COLOR", "TTY_COMPATIBLE")


def cli_env(*, store: Path | None = None, home: Path | None = None,
            path_first: Path | None = None, drop_prefixes: tuple[str, ...] = (),
            **names: str | None) -> dict[str, str]:
    """The environment of a CLI process a test starts.

    The test's own environment without ``OPENAI_*``, ``DSH_WORKFLOW_*``, ``COLUMNS``,
    ``FORCE_COLOR``, ``TTY_COMPATIBLE`` and any name starting with one of ``drop_prefixes``;
    the checkout first on ``PYTHONPATH``; ``TERM=dumb``. ``store`` sets
    ``DSH_WORKFLOW_STORE``, ``home`` sets ``HOME``, ``path_first`` is put first on ``PATH``
    (fake agent CLIs). Each of ``names`` is then set, or removed where its value is None.
    A new dict each call; the test's own ``os.environ`` is never changed.
    """
    dropped = _CLI_ENV_DROPPED_PREFIXES + drop_prefixes
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(dropped) and k not in _CLI_ENV_DROPPED}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    env["TERM"] = "dumb"
    if store is not None:
        env["DSH_WORKFLOW_STORE"] = str(store)
    if home is not None:
        env["HOME"] = str(home)
    if path_first is not None:
        env["PATH"] = f"{path_first}{os.pathsep}{env.get('PATH', '')}"
    for name, value in names.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def cli_command(*argv: str | Path) -> list[str]:
    """The argv that runs ``dsh-workflow *argv`` from this checkout with this interpreter
    (for tests that start the process themselves: signals, servers)."""
    return [sys.executable, "-m", "dsh_workflow", *map(str, argv)]


@overload
def run_cli(*argv: str | Path, cwd: Path = ..., store: Path | None = ...,
            home: Path | None = ..., env: Mapping[str, str] | None = ...,
            stdin: str | None = ..., timeout: float = ..., umask: int = ...,
            binary: Literal[False] = ...) -> subprocess.CompletedProcess[str]: ...


@overload
def run_cli(*argv: str | Path, cwd: Path = ..., store: Path | None = ...,
            home: Path | None = ..., env: Mapping[str, str] | None = ...,
            stdin: str | None = ..., timeout: float = ..., umask: int = ...,
            binary: Literal[True]) -> subprocess.CompletedProcess[bytes]: ...


def run_cli(*argv: str | Path, cwd: Path = REPO, store: Path | None = None,
            home: Path | None = None, env: Mapping[str, str] | None = None,
            stdin: str | None = None, timeout: float = 120, umask: int = -1,
            binary: bool = False) -> subprocess.CompletedProcess[str] | subprocess.CompletedProcess[bytes]:
    """Run ``dsh-workflow *argv`` in ``cwd`` as a real process and wait for it.

    The environment is ``env`` when given (build it with :func:`cli_env`), else
    ``cli_env(store=store, home=home)``; passing ``env`` with ``store`` or ``home`` is a
    ``TypeError``. Output is captured, as UTF-8 text, or as bytes with ``binary`` (nothing
    decoded for the test); ``stdin`` is fed as UTF-8. Never raises for the command's exit code;
    raises ``subprocess.TimeoutExpired`` (the process killed) after ``timeout`` seconds, a
    bound for a hung command far above a healthy one's run.
    """
    if env is not None and (store is not None or home is not None):
        raise TypeError("run_cli: pass store/home to cli_env() when passing env")
    command = cli_command(*argv)
    chosen = dict(env) if env is not None else cli_env(store=store, home=home)
    if binary:
        return subprocess.run(command, cwd=cwd, env=chosen, capture_output=True,
                              input=None if stdin is None else stdin.encode("utf-8"),
                              timeout=timeout, umask=umask, check=False)
    return subprocess.run(command, cwd=cwd, env=chosen, capture_output=True, text=True,
                          encoding="utf-8", input=stdin, timeout=timeout, umask=umask,
                          check=False)


def _timed_out(what: str, timeout: float, last: object) -> AssertionError:
    return AssertionError(f"waited {timeout:g} s for {what}; last seen: {last!r}")


def wait_until(condition: Callable[[], T | None], *, what: str, timeout: float = 30.0,
               interval: float = POLL_INTERVAL_S) -> T:
    """Poll ``condition`` (in this thread, blocking it) until it returns something truthy;
    return that.

    ``condition`` is called at once, then every ``interval`` seconds. Raises AssertionError
    naming ``what``, the timeout and the last value seen, once ``timeout`` seconds have passed
    without it holding (it is always called once more at the deadline). For synchronous tests
    and helpers; an async test uses :func:`await_until`, which lets its event loop run.
    """
    deadline = time.monotonic() + timeout
    while True:
        last = condition()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise _timed_out(what, timeout, last)
        time.sleep(interval)


def wait_while_running(process: subprocess.Popen[Any], condition: Callable[[], T | None], *,
                       what: str, timeout: float = 30.0, interval: float = POLL_INTERVAL_S,
                       output: Path | None = None) -> T:
    """:func:`wait_until` for what ``process`` is to bring about (a line on its stderr, a file
    its children write, a port it listens on). Fails at once if ``process`` has exited and the
    condition still does not hold, with the text of ``output`` (the file its stderr goes to)
    when given."""
    def look() -> T | None:
        found = condition()
        if found or process.poll() is None:
            return found
        found = condition()  # it may have come true as the process ended
        assert found, (f"the process exited ({process.returncode}) before {what}"
                       + (f": {output.read_text(errors='replace')}" if output else ""))
        return found

    return wait_until(look, what=what, timeout=timeout, interval=interval)


@overload
async def await_until(condition: Callable[[], Coroutine[Any, Any, T | None]], *, what: str,
                      timeout: float = ..., interval: float = ...) -> T: ...


@overload
async def await_until(condition: Callable[[], T | None], *, what: str, timeout: float = ...,
                      interval: float = ...) -> T: ...


async def await_until(condition: Callable[[], Any], *, what: str, timeout: float = 30.0,
                      interval: float = POLL_INTERVAL_S) -> Any:
    """:func:`wait_until` for async tests: the same contract, sleeping with ``anyio.sleep``
    between looks so the test's event loop (and the run it watches) goes on.

    ``condition`` may also be an async function (a look that reads a run store or opens a
    connection): its coroutine is awaited, in full, on each look. Any other value it returns
    is taken as it is, even one that could be awaited."""
    deadline = time.monotonic() + timeout
    while True:
        last = condition()
        if inspect.iscoroutine(last):
            last = await last
        if last:
            return last
        if time.monotonic() >= deadline:
            raise _timed_out(what, timeout, last)
        await anyio.sleep(interval)


async def await_none_left(left: Callable[[], Collection[object]], *, what: str,
                          timeout: float = 30.0) -> None:
    """:func:`await_until` for leftovers: wait until ``left()`` (threads, pids, ...) is empty.
    On a timeout the AssertionError names ``what`` and what was still left."""
    items: Collection[object] = ()

    def none_left() -> bool:
        nonlocal items
        items = left()
        return not items

    try:
        await await_until(none_left, what=what, timeout=timeout)
    except AssertionError:
        raise _timed_out(what, timeout, sorted(map(str, items))) from None


def run_beside_playwright(fn: Callable[..., Awaitable[T]], *args: Any) -> T:
    """``anyio.run(fn, *args)`` from a synchronous test or fixture, also while a Playwright
    browser is open in this thread: Playwright's sync API leaves its asyncio loop marked running
    there, so ``asyncio.run`` would refuse to start; this runs on trio, which does not look."""
    return anyio.run(fn, *args, backend="trio")


def wait_for_output(path: Path, pattern: str, *, count: int = 1,
                    timeout: float = 30.0) -> re.Match[str]:
    """Wait until the regular expression ``pattern`` matches ``count`` times in the text of the
    file ``path`` (a process's stderr written to a file; missing counts as empty); return the
    last match. Raises AssertionError with the file's text after ``timeout`` seconds."""
    def matches() -> list[re.Match[str]]:
        text = path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
        found = list(re.finditer(pattern, text, re.M))
        return found if len(found) >= count else []

    try:
        return wait_until(matches, what=f"{pattern!r} x{count} in {path.name}",
                          timeout=timeout)[-1]
    except AssertionError:
        text = path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
        raise AssertionError(f"{pattern!r} x{count} not seen in {path} within {timeout:g} s: "
                             f"{text!r}") from None


async def settled_run(store: RunStore, run_id: str) -> RunRecord | None:
    """Run ``run_id``'s record once it no longer reads ``running``; None until then (also
    while it is not recorded). A look for :func:`await_until`."""
    run = await store.get_run(run_id)
    return None if run is None or run.status == "running" else run


def written_files(folder: Path) -> list[Path]:
    """The files in ``folder`` that hold something: a fake agent makes its file (named by its
    pid) empty, then writes it, so an empty one is not counted yet."""
    return [path for path in folder.iterdir() if path.stat().st_size]


def alive(pid: int) -> bool:
    """Whether ``pid`` is a process that has not exited (a zombie counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:  # pragma: no cover - not Linux: ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True


def store_has_call(store: Path, seq: int) -> bool:
    """Whether call ``seq`` of a run is in the run store ``store``'s ``calls`` table (read
    straight from the file, read-only: a CLI command per look could outlast what is awaited)."""
    if not store.exists():
        return False
    with contextlib.closing(sqlite3.connect(f"file:{store}?mode=ro", uri=True)) as db:
        try:
            return db.execute("SELECT 1 FROM calls WHERE seq = ?", (seq,)).fetchone() is not None
        except sqlite3.OperationalError:  # not created yet
            return False


def wait_spinning(pid: int, *, cpu_s: float = 0.1, timeout: float = 30.0) -> None:
    """Wait until process ``pid`` has used ``cpu_s`` more CPU seconds than when called: a
    script spinning in it is under way. Where the CPU cannot be read (no ``/proc``), returns
    at once."""
    from dsh_workflow._engines.subprocess.sandbox import process_cpu_seconds

    before = process_cpu_seconds(pid)
    if before is None:
        return
    wait_until(lambda: (process_cpu_seconds(pid) or 0.0) - before >= cpu_s,
               what=f"process {pid} to spin for {cpu_s:g} s of CPU", timeout=timeout)


@contextlib.contextmanager
def local_http(handler: type[BaseHTTPRequestHandler]) -> Iterator[str]:
    """A real HTTP server on 127.0.0.1 (a free port) answering with ``handler`` on a thread of
    its own; yields its base address (``http://127.0.0.1:PORT``). Shut down, closed and joined
    on exit. The caller clears proxy variables if a client would read them."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def send_json(handler: BaseHTTPRequestHandler, data: bytes, status: int = 200) -> None:
    """Answer ``handler``'s request with the JSON text ``data``."""
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)

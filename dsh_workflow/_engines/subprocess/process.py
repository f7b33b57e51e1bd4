"""The parent side of sandbox processes: starting, supervising, killing and reaping them.

:class:`SandboxProcess` is one started process (pipes, pid, private working directory).
:class:`ProcessRuntime` binds one process to one run: it is the run's
:class:`~dsh_workflow._engines.script.wire.ScriptRuntime` (``start``/``settle``/``stop`` become
frames) and, in :meth:`ProcessRuntime.serve`, the task that feeds ``HostedRun.report`` from the
process's stdout — always on the event loop, always ending with exactly one ``end`` report: as
soon as the end frame arrives (the outcome is final; the process is reaped right after, and
``is_alive()`` stays true until it is), or once the process has been reaped when it ended
without one.

A run ends as ``error`` (or ``cancelled``, when a cancel came first — decided by the run's stop
cause, ``stop.prevails``) when the process breaks the protocol, exits or is killed without an end
frame, runs one stretch of script past ``2 × slice_cpu_limit_s + 0.5`` CPU seconds, or is busy
without any CPU progress for ``SandboxPolicy.hang_after_s``. A stopped or finished process is
SIGKILLed if it has not exited within the stop grace. Those kill decisions are the
:class:`~.watchdog.Watchdog`'s (``watchdog.py``); this module feeds it the clock and ``/proc``.
Nothing here raises into the run: every failure becomes the run's outcome.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import time
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

import anyio
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream

from ..._errors import WorkflowErrorCode
from ..script.limits import RuntimeLimits, cpu_backstop_spent, limit_error
from ..script.wire import LimitKind, ReportKind, ScriptOutcome, SettleEntry, failed, refusal
from . import frames
from .sandbox import SandboxPolicy, make_workdir, process_cpu_seconds
from .watchdog import Kill, KillReason, Watchdog

if TYPE_CHECKING:
    from ..._config import EngineConfig
    from ..host.host import HostedRun

__all__ = ["ProcessRuntime", "SandboxProcess", "start_sandbox"]

logger = logging.getLogger("dsh_workflow.engine")

_STREAM_GONE = (anyio.EndOfStream, anyio.IncompleteRead, anyio.BrokenResourceError,
                anyio.ClosedResourceError, OSError)
_STDERR_KEEP = 4096
_UNSET: Any = object()


class SandboxProcess:
    """A started sandbox process. :meth:`reap` kills it (if needed), waits for its exit status,
    closes its pipes and removes its working directory; it never raises."""

    def __init__(self, process: Process, workdir: str) -> None:
        self.process = process
        self.workdir = workdir
        self.reaped = False
        # Signals go through a pidfd where the kernel has them: it can never hit a recycled
        # pid. (Popen.kill() is avoided: it polls first, which would reap the process behind
        # asyncio's child watcher.)
        try:
            self._pidfd: int | None = os.pidfd_open(process.pid)
        except (AttributeError, OSError):
            self._pidfd = None

    @property
    def pid(self) -> int:
        return self.process.pid

    def exited(self) -> bool:
        """True once the process has exited (it may still need reaping)."""
        return self.process.returncode is not None

    def kill(self) -> None:
        """Send SIGKILL unless the process is known to have exited; never raises."""
        if self.process.returncode is not None or self.reaped:
            return
        try:
            if self._pidfd is not None:
                signal.pidfd_send_signal(self._pidfd, signal.SIGKILL)
            else:
                os.kill(self.process.pid, signal.SIGKILL)
        except OSError:  # already exited
            pass

    async def reap(self) -> int | None:
        """Kill, wait and clean up (shielded); returns the exit status (negative: a signal)."""
        with anyio.CancelScope(shield=True):
            if not self.reaped:
                self.kill()
                try:
                    await self.process.aclose()  # closes the pipes, waits for the exit status
                except Exception:
                    logger.warning("dsh-workflow: reaping sandbox process %d failed", self.pid,
                                   exc_info=True)
                shutil.rmtree(self.workdir, ignore_errors=True)
                if self._pidfd is not None:
                    os.close(self._pidfd)
                    self._pidfd = None
                self.reaped = True
        return self.process.returncode


async def start_sandbox(argv: Sequence[str]) -> SandboxProcess:
    """Start one sandbox process running ``argv``: empty environment, only its three pipes,
    a fresh private working directory, its own session. Raises OSError if it cannot start."""
    workdir = make_workdir()
    try:
        process = await anyio.open_process(
            list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            cwd=workdir, env={}, start_new_session=True)
    except BaseException:
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    return SandboxProcess(process, workdir)


class ProcessRuntime:
    """One run's script runtime in a sandbox process (see the module docstring).

    ``process`` is a warm process from the pool, or None to start one with ``launch`` when
    :meth:`serve` begins. The ``ScriptRuntime`` methods are synchronous, never block and never
    raise; frames are written by a writer task in :meth:`serve`.
    """

    def __init__(self, *, body: str, args_text: str | None, config: EngineConfig,
                 policy: SandboxPolicy, process: SandboxProcess | None,
                 launch: Callable[[], Awaitable[SandboxProcess]],
                 budget_tokens: int | None = None,
                 numbers: Callable[[], str] | None = None,
                 budget_usd: float | None = None) -> None:
        self._config = config
        self._policy = policy
        self._process = process
        self._launch = launch
        # Encoded at start(): a resumed run's recorded numbers are loaded after construction.
        self._run_parts: list[Any] | None = [body, args_text, budget_tokens]
        self._budget_usd = budget_usd
        self._numbers = numbers
        self._frames: deque[bytes] = deque()
        self._writer_wake = anyio.Event()
        self._watch_wake = anyio.Event()
        self._served = False
        self._reaped = False
        self._run_sent = False
        self._ready = False
        self._settles_sent = 0
        self._busy_since: float | None = None
        self._cpu_at_idle = 0.0
        self._stop_at: float | None = None
        self._end: Any = _UNSET
        self._end_at: float | None = None
        self._verdict: ScriptOutcome | None = None
        self._end_reported = False
        self._stderr = bytearray()
        #: What the process reported it applied to itself (``confine.py``), once it is ready.
        self.protections: tuple[str, ...] = ()

    # ---- ScriptRuntime --------------------------------------------------------------------

    def start(self) -> None:
        if self._run_parts is not None:
            numbers = self._numbers() if self._numbers is not None else None
            self._send(frames.encode(frames.RUN, [*self._run_parts, numbers,
                                                      self._budget_usd]))
            self._run_parts = None
            self._run_sent = True
            self._became_busy()

    def settle(self, entry: SettleEntry) -> None:
        if self._stop_at is not None or self._end is not _UNSET:
            return
        try:
            frame = frames.encode(frames.SETTLE, entry)
        except (TypeError, ValueError, RecursionError):
            frame = frames.encode(frames.SETTLE, refusal(
                entry[0], WorkflowErrorCode.AGENT_FAILED.value,
                "agent() failed: the subagent's result is not JSON data"))
        self._settles_sent += 1
        self._send(frame)
        self._became_busy()

    def stop(self) -> None:
        if self._stop_at is None:
            self._stop_at = time.monotonic()
            self._send(frames.encode(frames.STOP, None))
            self._poke()

    def is_alive(self) -> bool:
        return not self._reaped

    # ---- diagnostics ----------------------------------------------------------------------

    @property
    def pid(self) -> int | None:
        """The sandbox process's pid while it exists (None before it started or once reaped)."""
        if self._process is None or self._reaped:
            return None
        return self._process.pid

    # ---- internals ------------------------------------------------------------------------

    def _send(self, frame: bytes) -> None:
        self._frames.append(frame)
        self._writer_wake.set()

    def _poke(self) -> None:
        self._watch_wake.set()

    def _became_busy(self) -> None:
        if self._busy_since is None:
            self._busy_since = time.monotonic()
            self._poke()

    def _kill(self, verdict: ScriptOutcome | None) -> None:
        if self._verdict is None and verdict is not None:
            self._verdict = verdict
        if self._process is not None:
            self._process.kill()

    def _violation(self, problem: str) -> None:
        self._kill(failed(f"the sandbox process broke the engine protocol: it sent {problem}"))

    async def serve(self, run: HostedRun) -> None:
        """Serve ``run`` until its process has been reaped (the run's task; never raises).

        Starts a process first when none came from the pool, and reports ``end`` to the run
        exactly once: on the end frame, or after reaping with the outcome that explains why
        there was none (a verdict of the engine, a stop, a crash).
        """
        assert not self._served, "a ProcessRuntime serves one run"
        self._served = True
        try:
            if self._process is None and self._stop_at is None:
                try:
                    self._process = await self._launch()
                except Exception as exc:  # noqa: BLE001 - becomes the run's error
                    self._verdict = failed(f"the sandbox process could not be started: {exc}")
            if self._process is not None:
                if self._stop_at is not None and not self._run_sent:
                    self._process.kill()  # never got its script
                else:
                    await self._supervise(run, self._process)
        finally:
            with anyio.CancelScope(shield=True):
                status = await self._process.reap() if self._process is not None else None
                outcome = self._outcome(status)
                self._reaped = True
                self._report_end(run, outcome)

    def _report_end(self, run: HostedRun, outcome: ScriptOutcome | None) -> None:
        if not self._end_reported:
            self._end_reported = True
            run.report(ReportKind.END, outcome)

    async def _supervise(self, run: HostedRun, process: SandboxProcess) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._write, process)
            tg.start_soon(self._watch, process)
            tg.start_soon(self._drain_stderr, process)
            try:
                await self._read(run, process)
            finally:
                process.kill()  # a no-op once it exited by itself
                with anyio.CancelScope(shield=True):
                    with anyio.move_on_after(5.0):
                        await process.process.wait()
                tg.cancel_scope.cancel()

    def _outcome(self, status: int | None) -> ScriptOutcome | None:
        if self._verdict is not None:
            return self._verdict
        if self._end is not _UNSET:
            return self._end  # type: ignore[no-any-return]  # an ScriptOutcome once set
        if self._stop_at is not None:
            return None
        detail = "" if status is None else (
            f" (killed by {_signal_name(-status)})" if status < 0 else f" (exit status {status})")
        if self._stderr:
            logger.warning("dsh-workflow: sandbox process ended without a result%s; its "
                           "stderr: %s", detail,
                           self._stderr.decode("utf-8", "replace").strip())
        if status is not None and -status == getattr(signal, "SIGXCPU", None):
            return cpu_backstop_spent()
        return failed(f"the sandbox process ended without a result{detail}")

    # ---- tasks ----------------------------------------------------------------------------

    async def _write(self, process: SandboxProcess) -> None:
        stdin = process.process.stdin
        assert stdin is not None
        while True:
            if not self._frames:
                self._writer_wake = anyio.Event()
                await self._writer_wake.wait()
                continue
            data = b"".join(self._frames)
            self._frames.clear()
            try:
                await stdin.send(data)
            except _STREAM_GONE:
                return  # the reader sees the process go

    async def _read(self, run: HostedRun, process: SandboxProcess) -> None:
        stdout = process.process.stdout
        assert stdout is not None
        stream = BufferedByteReceiveStream(stdout)
        limit = frames.max_child_frame_bytes(self._config.memory_limit_bytes)
        while True:
            try:
                header = await stream.receive_exactly(frames.HEADER.size)
            except _STREAM_GONE:
                return
            try:
                length = frames.frame_length(header, limit)
            except frames.ProtocolError as exc:
                self._violation(str(exc))
                return
            try:
                body = await stream.receive_exactly(length)
            except _STREAM_GONE:
                return
            try:
                self._on_frame(run, *frames.decode_payload(body))
            except frames.ProtocolError as exc:
                self._violation(str(exc))
                return
            del body

    def _on_frame(self, run: HostedRun, kind: bytes, text: str) -> None:
        value = frames.parse_child_frame(kind, text)
        if kind == frames.READY:
            if self._ready:
                raise frames.ProtocolError("a second ready frame")
            self._ready = True
            self._cpu_at_idle = value[1]
            self.protections = value[2]
            logger.debug("dsh-workflow: sandbox process %s ready, confined by %s",
                         self.pid, ", ".join(self.protections) or "nothing")
            return
        if not self._ready:
            raise frames.ProtocolError(f"a {kind.decode()!r} frame before its ready frame")
        if self._end is not _UNSET:
            raise frames.ProtocolError("a frame after its end frame")
        if kind == frames.OUTBOX:
            if not self._run_sent:
                raise frames.ProtocolError("hook calls before it was given a script")
            run.report(ReportKind.OUTBOX, value)
        elif kind == frames.IDLE:
            received, cpu = value
            if received > self._settles_sent:
                raise frames.ProtocolError("an idle frame counting settlements never sent")
            self._cpu_at_idle = cpu
            if received == self._settles_sent:
                self._busy_since = None
        else:
            if not self._run_sent:
                raise frames.ProtocolError("an end frame before it was given a script")
            self._end = value
            self._end_at = time.monotonic()
            self._poke()
            # The outcome is final: settle the run now; the process is reaped after (is_alive()
            # stays true until then, so dispose() still waits for it).
            self._report_end(run, value)

    async def _drain_stderr(self, process: SandboxProcess) -> None:
        stderr = process.process.stderr
        assert stderr is not None
        while True:
            try:
                chunk = await stderr.receive()
            except _STREAM_GONE:
                return
            self._stderr += chunk
            del self._stderr[:-_STDERR_KEEP]

    async def _watch(self, process: SandboxProcess) -> None:
        """Kill the process when its :class:`Watchdog` says so: a stretch overran, it hangs,
        or it outlived a stop or end. This loop only reads the clock and the CPU and sleeps."""
        watchdog = Watchdog(
            slice_cpu_limit_s=self._config.slice_cpu_limit_s,
            hang_after_s=self._policy.hang_after_s,
            grace_s=min(self._policy.stop_grace_s, self._config.dispose_grace_s / 2))
        while True:
            now = time.monotonic()
            verdict = watchdog.check(now, busy_since=self._busy_since, stopped_at=self._stop_at,
                                     ended_at=self._end_at, cpu_at_idle=self._cpu_at_idle,
                                     cpu=lambda: process_cpu_seconds(process.pid))
            if isinstance(verdict, Kill):
                self._kill(self._kill_outcome(verdict.reason))
                return
            with anyio.move_on_after(max(0.0, verdict.at - now)):
                await self._watch_wake.wait()
            if self._watch_wake.is_set():
                self._watch_wake = anyio.Event()

    def _kill_outcome(self, reason: KillReason) -> ScriptOutcome | None:
        """The run's outcome for a watchdog's kill (None: the run already stopped or ended)."""
        if reason is KillReason.OVERRUN:
            return limit_error(LimitKind.SLICE, RuntimeLimits.of(self._config)).as_outcome()
        if reason is KillReason.HUNG:
            return self._hung()
        return None

    def _hung(self) -> ScriptOutcome:
        return failed(
            "the sandbox process stopped responding: it was busy with the script but made no "
            f"progress for {self._policy.hang_after_s:g} s, and was killed")


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"

"""A subagent provider that runs a command-line agent once per child (POSIX only).

Contract of :class:`CommandProvider`:

- **Input.** The child is ``argv`` started with :func:`anyio.open_process` in a new session (its
  own process group). The prompt is written to its stdin as UTF-8, then stdin is closed.
- **Environment.** Explicit, never inherited: exactly the ``env`` mapping given (default: only
  ``PATH``, copied from the host), plus ``DSH_WORKFLOW_LABEL``, ``DSH_WORKFLOW_RUN_ID``,
  ``DSH_WORKFLOW_SEQ`` and, when set on the request, ``DSH_WORKFLOW_PHASE``,
  ``DSH_WORKFLOW_MODEL`` and ``DSH_WORKFLOW_SCHEMA`` (the schema as JSON text), so a wrapper
  script can pass them on to the real agent. (The OS limits one variable's size, 128 KiB on
  Linux; a larger schema makes the start fail with ``OSError``.)
- **Output.** Exit status 0: stdout, decoded as UTF-8 with ``errors="replace"``, is the text.
  With a schema, stdout must be one JSON value (surrounding whitespace and one Markdown code
  fence are tolerated) that satisfies the schema; it becomes ``structured``.
- **Ordinary failures** (``stop_reason="error"``, the script sees ``null``): a non-zero exit or
  death by signal, ``timeout_s`` passing, stdout larger than ``max_output_bytes``, stdout that is
  not valid JSON or violates the schema. ``error`` carries the reason and the last ~2000
  characters of stderr. Memory is bounded: stdout is kept up to ``max_output_bytes`` (the child
  is killed when it writes more) and stderr only as a tail.
- **Raises** ``OSError`` only when the command cannot be started at all (missing executable, no
  permission): that is a configuration fault, which the engine makes fatal ``AGENT_FAILED``.
- **Cleanup and cancellation.** On cancellation, timeout or overflow the whole process group is
  sent SIGTERM, then SIGKILL after ``kill_grace_s``, and the child is reaped before ``run``
  returns or re-raises; cancellation always propagates. When the child exits by itself, any
  process it left behind in its group is terminated the same way, so no process outlives
  ``run``.
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
import sys
from collections.abc import Mapping, Sequence
from subprocess import PIPE
from typing import Any

import anyio
import anyio.abc

from .._schema import value_violations
from .._subagent import SubagentRequest, SubagentResult

__all__ = ["CommandProvider", "parse_structured_reply"]

_STDERR_TAIL_CHARS = 2000
_STDERR_KEEP_BYTES = 4 * _STDERR_TAIL_CHARS
_FENCE = re.compile(r"\A```[\w+-]*[ \t]*\r?\n(.*?)\r?\n?```\Z", re.DOTALL)


def parse_structured_reply(text: str, schema: dict[str, Any]) -> tuple[Any, list[str]]:
    """Parse ``text`` as one JSON value and validate it against ``schema``.

    Surrounding whitespace and one Markdown code fence (```` ```json ... ``` ````) are tolerated;
    ``NaN``/``Infinity`` are not JSON. Returns ``(value, violations)``: an empty list means the
    value is valid; otherwise ``value`` is ``None`` when the text was not JSON at all. Never raises.
    """
    body = text.strip()
    fenced = _FENCE.match(body)
    if fenced:
        body = fenced.group(1).strip()
    try:
        value = json.loads(body, parse_constant=_reject_constant)
    except ValueError as exc:
        return None, [f"the reply is not valid JSON: {exc}"]
    return value, value_violations(schema, value)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON value")


class CommandProvider:
    """Runs ``argv`` once per child: the prompt on stdin, stdout is the answer.

    See the module docstring for the full contract (environment, failures, cleanup).
    ``timeout_s=None`` means no limit of the provider's own (the engine's ``agent_timeout_s``
    still applies through cancellation).
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        timeout_s: float | None = None,
        max_output_bytes: int = 10_000_000,
        kill_grace_s: float = 2.0,
    ) -> None:
        if isinstance(argv, str | bytes) or not argv or not all(isinstance(a, str) for a in argv):
            raise ValueError("argv must be a non-empty sequence of strings")
        if timeout_s is not None and not (timeout_s > 0 and math.isfinite(timeout_s)):
            raise ValueError(f"timeout_s must be a positive number or None, got {timeout_s!r}")
        if max_output_bytes < 1:
            raise ValueError(f"max_output_bytes must be at least 1, got {max_output_bytes!r}")
        if not kill_grace_s >= 0:
            raise ValueError(f"kill_grace_s must be >= 0, got {kill_grace_s!r}")
        self.argv = tuple(argv)
        self.env = dict(env) if env is not None else {"PATH": os.environ.get("PATH", os.defpath)}
        self.cwd = cwd
        self.timeout_s = timeout_s
        self.max_output_bytes = max_output_bytes
        self.kill_grace_s = kill_grace_s

    async def run(self, request: SubagentRequest) -> SubagentResult:
        """Run the command for one child; see the module docstring."""
        process = await anyio.open_process(
            list(self.argv),
            stdin=PIPE,
            stdout=PIPE,
            stderr=PIPE,
            cwd=self.cwd,
            env=self._child_env(request),
            start_new_session=True,
        )
        stdout, stderr = bytearray(), bytearray()
        overflow = False
        try:
            with anyio.move_on_after(self.timeout_s) as scope:
                async with anyio.create_task_group() as tg:

                    async def read_stdout() -> None:
                        nonlocal overflow
                        assert process.stdout is not None
                        async for chunk in process.stdout:
                            stdout.extend(chunk)
                            if len(stdout) > self.max_output_bytes:
                                overflow = True
                                scope.cancel()
                                return

                    tg.start_soon(_feed_stdin, process, request.prompt)
                    tg.start_soon(read_stdout)
                    tg.start_soon(_read_tail, process, stderr)
                    await process.wait()
                    # The child is done; whatever it left in its group must not hold the pipes open.
                    await _terminate_group(process, self.kill_grace_s)
        finally:
            with anyio.CancelScope(shield=True):
                await _terminate_group(process, self.kill_grace_s)
                await process.aclose()
        args = (request, process.returncode, stdout, stderr, overflow, scope.cancelled_caught)
        if request.schema is None:
            return self._result(*args)
        return await anyio.to_thread.run_sync(self._result, *args)  # validation: off the loop

    def _child_env(self, request: SubagentRequest) -> dict[str, str]:
        env = dict(self.env)
        env["DSH_WORKFLOW_LABEL"] = request.label
        env["DSH_WORKFLOW_RUN_ID"] = request.run_id
        env["DSH_WORKFLOW_SEQ"] = str(request.seq)
        for key, value in (("PHASE", request.phase), ("MODEL", request.model)):
            if value is not None:
                env[f"DSH_WORKFLOW_{key}"] = value
        if request.schema is not None:
            env["DSH_WORKFLOW_SCHEMA"] = json.dumps(request.schema, ensure_ascii=False)
        return env

    def _result(
        self,
        request: SubagentRequest,
        returncode: int | None,
        stdout: bytearray,
        stderr: bytearray,
        overflow: bool,
        timed_out: bool,
    ) -> SubagentResult:
        if overflow:
            return _failure(f"command output exceeded max_output_bytes={self.max_output_bytes}", stderr)
        if timed_out:
            return _failure(f"command timed out after timeout_s={self.timeout_s}", stderr)
        if returncode != 0:
            return _failure(_describe_exit(returncode), stderr)
        text = stdout.decode("utf-8", errors="replace")
        if request.schema is None:
            return SubagentResult(stop_reason="completed", text=text)
        value, violations = parse_structured_reply(text, request.schema)
        if violations:
            return SubagentResult(
                stop_reason="error",
                text=text,
                error="command output does not satisfy the schema: " + "; ".join(violations),
            )
        return SubagentResult(stop_reason="completed", text=text, structured=value)


def _failure(reason: str, stderr: bytearray) -> SubagentResult:
    tail = stderr.decode("utf-8", errors="replace")[-_STDERR_TAIL_CHARS:].strip()
    error = f"{reason}; stderr: {tail}" if tail else f"{reason} (no stderr)"
    return SubagentResult(stop_reason="error", error=error)


def _describe_exit(returncode: int | None) -> str:
    if returncode is not None and returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"command was killed by {name}"
    return f"command exited with status {returncode}"


async def _feed_stdin(process: anyio.abc.Process, prompt: str) -> None:
    assert process.stdin is not None
    try:
        await process.stdin.send(prompt.encode("utf-8", errors="replace"))
    except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
        pass  # the child does not read its stdin; that is its business
    finally:
        with anyio.CancelScope(shield=True):
            try:
                await process.stdin.aclose()
            except (anyio.BrokenResourceError, OSError):
                pass


async def _read_tail(process: anyio.abc.Process, tail: bytearray) -> None:
    assert process.stderr is not None
    async for chunk in process.stderr:
        tail.extend(chunk)
        if len(tail) > 2 * _STDERR_KEEP_BYTES:
            del tail[:-_STDERR_KEEP_BYTES]


def _signal_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to the group; False when no process of the group is left."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        # A member we may not signal (it changed its credentials): nothing more we can do.
        return False
    return True


def _group_alive(pgid: int) -> bool:
    """Whether the group has a member that is not a zombie.

    Orphans are reparented to PID 1, which in some containers never reaps them; a zombie still
    counts for ``killpg`` but is dead, so on Linux ``/proc`` decides.
    """
    if not _signal_group(pgid, 0):
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


async def _terminate_group(process: anyio.abc.Process, grace_s: float) -> None:
    """SIGTERM the child's process group, SIGKILL it after ``grace_s``, and reap the child.

    Returns at once when no live process is left in the group. The child is the group leader
    (``start_new_session``), so the group id is its pid, which cannot be reused while any member
    of the group exists.
    """
    pgid = process.pid
    if not _group_alive(pgid):
        return
    _signal_group(pgid, signal.SIGTERM)
    with anyio.move_on_after(grace_s):
        await process.wait()
        while _group_alive(pgid):
            await anyio.sleep(0.02)
    if _group_alive(pgid):
        _signal_group(pgid, signal.SIGKILL)
    await process.wait()
    with anyio.move_on_after(1.0):  # SIGKILL is delivered asynchronously; let it land
        while _group_alive(pgid):
            await anyio.sleep(0.01)

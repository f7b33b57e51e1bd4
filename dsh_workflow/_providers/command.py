"""A subagent provider that runs a command-line agent once per child (POSIX only).

Contract of :class:`CommandProvider`:

- **Input.** The child is ``argv`` started with :func:`anyio.open_process` in a new session (its
  own process group). The prompt is written to its stdin as UTF-8, then stdin is closed.
- **Environment.** Explicit, never inherited: exactly the ``env`` mapping given (default: only
  ``PATH``, copied from the host), plus ``DSH_WORKFLOW_LABEL``, ``DSH_WORKFLOW_RUN_ID``,
  ``DSH_WORKFLOW_SEQ`` and, when set on the request, ``DSH_WORKFLOW_PHASE``,
  ``DSH_WORKFLOW_MODEL``, ``DSH_WORKFLOW_SCHEMA`` (the schema as JSON text),
  ``DSH_WORKFLOW_EFFORT`` (``low``, ``medium``, ``high`` or ``max``, passed as given: the command
  maps it to its agent's own setting), ``DSH_WORKFLOW_AGENT_TYPE``, and from the resolved agent
  definition ``DSH_WORKFLOW_SYSTEM_PROMPT`` (when not empty) and ``DSH_WORKFLOW_AGENT_TOOLS``
  (a JSON array, when the definition restricts tools), so a wrapper script can pass them on to
  the real agent. The definition's model arrives as ``DSH_WORKFLOW_MODEL``: the engine has
  already applied it to ``request.model``. An isolated child also gets ``DSH_WORKFLOW_WORKTREE``.
  Under a token budget, ``DSH_WORKFLOW_MAX_OUTPUT_TOKENS`` is the budget left at the child's
  start (pass it on as the agent's output limit).
  When the engine traces its runs (docs/telemetry.md), ``TRACEPARENT`` and ``OTEL_TRACEPARENT``
  hold the child's agent span as a W3C ``traceparent``, so a child that traces itself nests
  under it.
- **Usage.** A command reports its token usage with a line on stderr,
  ``dsh-workflow-usage: {"input_tokens": N, "output_tokens": M}`` (optionally also
  ``cache_read_tokens``, ``cache_write_tokens`` and ``cost_usd``, the cost the agent reports);
  the last such line in the stderr tail becomes the result's ``usage`` (also for a failed
  child), which budgets count. No such line means no usage reported; a malformed one is
  ignored, and one whose numbers are not finite or negative fails the child (``error_kind``
  ``invalid_answer``). A usage without a cost is priced by the engine for the request's model
  (docs/embedding.md, "Cost in money").
  (The OS limits one variable's size, 128 KiB on Linux; a larger schema or system prompt makes
  the start fail with ``OSError``.)
- **Argv placeholders.** In every ``argv`` element the exact texts ``{effort}``, ``{model}``,
  ``{agent_type}``, ``{system_prompt}`` and ``{max_output_tokens}`` are replaced by the request's values (the empty
  string when absent), in one pass, so a value is never itself expanded; any other brace text is
  left as it is. E.g. ``["my-agent", "--effort={effort}"]``. For a flag that must disappear
  when the value is absent, use a wrapper script and the environment variables instead.
- **Isolation.** A request with ``isolation="worktree"`` runs in a fresh detached git worktree
  of the repository the provider's ``cwd`` (default: the host's working directory) lies in, in
  the same subfolder, under ``worktree_dir`` (default: the system's temporary folder); see
  :mod:`.worktree` for what "changed" means and how removal works. Afterwards an unchanged
  worktree is removed; a changed one is kept, and ``"\n\nWorktree with changes kept at <path>
  (detached from commit <sha>)."`` is appended to the text (after the schema was checked, so
  ``structured`` is unaffected) — or to ``error`` when the child failed. On cancellation the
  worktree is always removed, after the child's processes are gone. Not inside a git
  repository (or one without commits, or in a folder its ``HEAD`` commit lacks) raises
  ``WorktreeError``: the run cannot give the child
  the isolation it asked for, and running it in the shared tree instead could clobber other
  children's work, so it is a configuration fault (fatal ``AGENT_FAILED``), not a child failure.
- **Output.** Exit status 0: stdout, decoded as UTF-8 with ``errors="replace"``, is the text.
  With a schema, stdout must be one JSON value (surrounding whitespace and one Markdown code
  fence are tolerated) that satisfies the schema; it becomes ``structured``.
- **Ordinary failures** (``stop_reason="error"``, the script sees ``null``): a non-zero exit or
  death by signal, ``timeout_s`` passing, stdout larger than ``max_output_bytes``, stdout that is
  not valid JSON or violates the schema. ``error``'s first line is the last non-empty line of
  stderr (what a program says last: a traceback's exception) followed by the exit status or
  signal in parentheses; the next lines hold the tail of stderr: its last 20 lines, at most
  2,000 characters (a usage line excluded). ``error_kind`` is ``timeout`` for ``timeout_s``,
  ``invalid_answer`` for stdout that is not JSON or violates the schema (with the parsed value
  as ``structured``: the engine validates it and fails the child with kind ``invalid``), and
  ``other`` for the rest. Memory is bounded: stdout is kept up to ``max_output_bytes`` (the child
  is killed when it writes more) and stderr only as a tail.
- **Raises** :class:`~dsh_workflow.ProviderUnavailable` when the command does not exist or is
  not executable (every later child would fail the same way: the engine ends the run at once
  with fatal ``AGENT_FAILED`` naming the command), ``OSError`` when it cannot be started for
  another reason, and ``WorktreeError`` as said above: configuration faults, which the engine
  makes fatal ``AGENT_FAILED``.
- **Cleanup and cancellation.** On cancellation, timeout or overflow the whole process group is
  sent SIGTERM, then SIGKILL after ``kill_grace_s``, and the child is reaped before ``run``
  returns or re-raises; cancellation always propagates. When the child exits by itself, any
  process it left behind in its group is terminated the same way, so no process outlives
  ``run``. While it runs, its group is registered with :mod:`.reaper`: if the runner itself
  dies (even by SIGKILL) the group is SIGKILLed.
"""

from __future__ import annotations

import json
import math
import os
import re
import signal
from collections.abc import Mapping, Sequence
from subprocess import PIPE

import anyio
import anyio.abc
from pydantic import JsonValue, ValidationError

from .._failure import ProviderUnavailable, argv_secrets, redact_argv
from .._subagent import ErrorKind, ProviderInfo, SubagentRequest, SubagentResult, Usage
from .._telemetry import trace_env
from . import reaper
from .procgroup import terminate_group
from .structured import parse_structured_reply
from .worktree import Worktree, fresh_worktree, kept_note, worktree_env

__all__ = ["CommandProvider"]

_STDERR_TAIL_CHARS = 2000
_STDERR_TAIL_LINES = 20
_STDERR_KEEP_BYTES = 4 * _STDERR_TAIL_CHARS
_PLACEHOLDER = re.compile(r"\{(effort|model|agent_type|system_prompt|max_output_tokens)\}")
_USAGE_MARKER = b"dsh-workflow-usage:"


class CommandProvider:
    """Runs ``argv`` once per child: the prompt on stdin, stdout is the answer.

    See the module docstring for the full contract (environment, failures, cleanup).
    ``timeout_s=None`` means no limit of the provider's own (the engine's ``agent_timeout_s``
    still applies through cancellation). ``cwd`` is where children run (default: the host's
    working directory); ``worktree_dir`` is where isolated children's worktrees are created.
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
        worktree_dir: str | os.PathLike[str] | None = None,
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
        self.worktree_dir = worktree_dir

    @property
    def identity(self) -> str:
        """What answers this provider's calls, for durable runs' journal keys (docs/durable-runs.md): the
        command line (its secrets redacted) and the folder it runs in."""
        return "command " + json.dumps([redact_argv(self.argv), None if self.cwd is None
                                        else os.fspath(self.cwd)])

    @property
    def description(self) -> str:
        """What its children can do, in one line (docs/embedding.md, "The model-facing tool")."""
        program = (os.path.basename(self.argv[0]) or self.argv[0])[-40:]
        where = "the host's working folder" if self.cwd is None else os.fspath(self.cwd)
        if len(where) > 60:
            where = "…" + where[-59:]
        return (f"the program {program} once per child (prompt on stdin) in {where}: its own "
                "model, tools and files; isolation \"worktree\": a fresh git worktree; invalid "
                "structured answers are not re-asked")

    @property
    def info(self) -> ProviderInfo:
        """What this provider declares (:class:`~dsh_workflow.ProviderInfo`): kind
        ``command``, no default model (the command picks its own), the argv (secrets
        redacted) and folder as its record, the values after secret-looking flags as its
        secrets."""
        return ProviderInfo(kind="command", identity=self.identity, default_model=None,
                            description=self.description, record=self._record(),
                            secrets=argv_secrets(self.argv))

    def _record(self) -> dict[str, JsonValue]:
        record: dict[str, JsonValue] = {"kind": "command", "command": list(redact_argv(self.argv))}
        if self.cwd is not None:
            record["cwd"] = os.fspath(self.cwd)
        return record

    async def run(self, request: SubagentRequest) -> SubagentResult:
        """Run the command for one child; see the module docstring."""
        if request.isolation != "worktree":
            return await self._run_command(request, self.cwd, {})
        directory = self.cwd if self.cwd is not None else os.getcwd()
        async with fresh_worktree(directory, parent_dir=self.worktree_dir, tag=str(request.seq)) as worktree:
            result = await self._run_command(request, worktree.cwd, worktree_env(worktree))
            if not await worktree.changed():
                return result
            worktree.keep()
            return _with_kept_note(result, worktree)

    async def _run_command(
        self, request: SubagentRequest, cwd: str | os.PathLike[str] | None, extra_env: Mapping[str, str]
    ) -> SubagentResult:
        env = self._child_env(request)
        env.update(extra_env)
        argv = self._argv(request)
        try:
            process = await anyio.open_process(
                argv,
                stdin=PIPE,
                stdout=PIPE,
                stderr=PIPE,
                cwd=cwd,
                env=env,
                start_new_session=True,
            )
        except (FileNotFoundError, PermissionError) as exc:
            raise _unavailable(argv[0], exc, cwd) from None
        reaper.watch(process.pid)  # its group dies with this process, however that dies
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

                    tg.start_soon(_feed_stdin, process, self._stdin(request))
                    tg.start_soon(read_stdout)
                    tg.start_soon(_read_tail, process, stderr)
                    await process.wait()
                    # The child is done; whatever it left in its group must not hold the pipes open.
                    await terminate_group(process, self.kill_grace_s)
        finally:
            with anyio.CancelScope(shield=True):
                await terminate_group(process, self.kill_grace_s)
                await process.aclose()
                watcher = reaper.release(process.pid)
                if watcher is not None:
                    await anyio.to_thread.run_sync(reaper.reap, watcher)
        args = (request, process.returncode, stdout, stderr, overflow, scope.cancelled_caught)
        if request.schema is None:
            result = self._result(*args)
        else:
            result = await anyio.to_thread.run_sync(self._result, *args)  # validation: off the loop
        usage = _reported_usage(stderr)
        if isinstance(usage, str):
            return SubagentResult(stop_reason="error", error=usage, error_kind="invalid_answer")
        model = self._answering_model(stdout)
        if model is not None:
            result = result.model_copy(update={"model": model})
        return result if usage is None else result.model_copy(update={"usage": usage})

    def _stdin(self, request: SubagentRequest) -> str:
        """What the child reads on stdin (a preset may add to the prompt)."""
        return request.prompt

    def _model(self, request: SubagentRequest) -> str | None:
        """The model ``request`` asks for (a preset adds its default)."""
        return request.model

    def _answering_model(self, stdout: bytearray) -> str | None:
        """The model that answered, when the output names it (a preset reads its CLI's)."""
        return None

    def _child_env(self, request: SubagentRequest) -> dict[str, str]:
        env = dict(self.env)
        env["DSH_WORKFLOW_LABEL"] = request.label
        env["DSH_WORKFLOW_RUN_ID"] = request.run_id
        env["DSH_WORKFLOW_SEQ"] = str(request.seq)
        env.update(trace_env())  # the child's agent span, when the engine traces (SPEC §27)
        agent = request.agent
        for key, value in (
            ("PHASE", request.phase),
            ("MODEL", request.model),
            ("EFFORT", request.effort),
            ("AGENT_TYPE", request.agent_type),
            ("SYSTEM_PROMPT", agent.system_prompt if agent is not None and agent.system_prompt else None),
            ("MAX_OUTPUT_TOKENS", None if request.max_output_tokens is None
             else str(request.max_output_tokens)),
        ):
            if value is not None:
                env[f"DSH_WORKFLOW_{key}"] = value
        if request.schema is not None:
            env["DSH_WORKFLOW_SCHEMA"] = json.dumps(request.schema, ensure_ascii=False)
        if agent is not None and agent.tools is not None:
            env["DSH_WORKFLOW_AGENT_TOOLS"] = json.dumps(list(agent.tools), ensure_ascii=False)
        return env

    def _argv(self, request: SubagentRequest) -> list[str]:
        values = {
            "effort": request.effort or "",
            "model": request.model or "",
            "agent_type": request.agent_type or "",
            "system_prompt": request.agent.system_prompt if request.agent is not None else "",
            "max_output_tokens": "" if request.max_output_tokens is None
            else str(request.max_output_tokens),
        }
        return [_PLACEHOLDER.sub(lambda m: values[m.group(1)], arg) for arg in self.argv]

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
            return _failure(f"command timed out after timeout_s={self.timeout_s}", stderr,
                            "timeout")
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
                structured=value,
                error_kind="invalid_answer",
                error="command output does not satisfy the schema: " + "; ".join(violations)
                + f" (the output began: {text.strip()[:200]!r})",
            )
        return SubagentResult(stop_reason="completed", text=text, structured=value)


def _reported_usage(stderr: bytearray) -> Usage | str | None:
    """The usage of the last ``dsh-workflow-usage:`` line in the stderr tail, None without a
    well-formed one, or why its numbers cannot be a usage (not finite, negative)."""
    at = stderr.rfind(_USAGE_MARKER)
    if at < 0 or (at > 0 and stderr[at - 1] not in b"\r\n"):
        return None
    line = bytes(stderr[at + len(_USAGE_MARKER):]).split(b"\n", 1)[0]
    try:
        return Usage.model_validate_json(line)
    except ValueError as exc:
        numbers = {"greater_than_equal", "finite_number"}
        errors = exc.errors() if isinstance(exc, ValidationError) else []
        bad = [e for e in errors if e["type"] in numbers]
        if not bad:
            return None
        where = ", ".join(str(e["loc"][0]) for e in bad if e["loc"])
        return (f"the command reported a usage that cannot be counted ({where}: not a finite "
                "number from 0)")


def _with_kept_note(result: SubagentResult, worktree: Worktree) -> SubagentResult:
    note = kept_note(worktree)
    if result.stop_reason == "completed":
        return result.model_copy(update={"text": f"{result.text or ''}\n\n{note}"})
    return result.model_copy(update={"error": f"{result.error or 'the child failed'}; {note}"})


def _unavailable(program: str, exc: OSError,
                 cwd: str | os.PathLike[str] | None) -> ProviderUnavailable:
    """The fault of a command that cannot be started at all: it would fail every child."""
    if isinstance(exc, PermissionError):
        return ProviderUnavailable(f"the command {program!r} is not executable "
                                   f"({exc.strerror or exc})")
    if cwd is not None and not os.path.isdir(cwd):
        return ProviderUnavailable(f"the command's working directory {os.fspath(cwd)!r} does "
                                   "not exist")
    if os.sep not in program:
        return ProviderUnavailable(f"the command {program!r} was not found on PATH")
    return ProviderUnavailable(f"the command {program!r} does not exist "
                               f"({exc.strerror or exc})")


def stderr_tail(stderr: bytes | bytearray) -> str:
    """The last lines of a command's stderr: at most 20 lines and 2,000 characters, without
    ``dsh-workflow-usage:`` lines (they are read as usage)."""
    text = bytes(stderr).decode("utf-8", errors="replace")
    lines = [line for line in text.strip().splitlines()
             if not line.startswith(_USAGE_MARKER.decode())]
    tail = "\n".join(lines[-_STDERR_TAIL_LINES:]).strip()
    return tail[-_STDERR_TAIL_CHARS:]


#: Longest one-line reason taken from stderr.
_REASON_CHARS = 300


def _failure(reason: str, stderr: bytearray, kind: ErrorKind = "other") -> SubagentResult:
    """A failed child: its one-line reason is the last non-empty stderr line (where a program
    says what went wrong: a traceback's exception, not its ``Traceback ...`` header) with
    ``reason`` in parentheses; the whole tail follows on the next lines (``show --agent``)."""
    tail = stderr_tail(stderr)
    if not tail:
        return SubagentResult(stop_reason="error", error=f"{reason} (no stderr)", error_kind=kind)
    last = tail.rsplit("\n", 1)[-1].strip()
    if len(last) > _REASON_CHARS:  # a long line's end says most: the exception, the last words
        last = "…" + last[1 - _REASON_CHARS:]
    return SubagentResult(stop_reason="error", error_kind=kind,
                          error=f"{last} ({reason})\nstderr: {tail}")


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

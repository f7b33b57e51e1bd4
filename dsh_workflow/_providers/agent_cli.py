"""Agent command lines as children: presets of :class:`CommandProvider` for Claude Code and Codex.

Both run the agent CLI once per child, in its non-interactive mode, with everything else of
:class:`CommandProvider`'s contract (process group, timeout, output cap, cancellation,
``isolation: "worktree"`` — the child runs with its working directory in the fresh worktree).

:class:`ClaudeCodeProvider` follows **Claude Code 2.1**'s headless print mode
(:data:`CLAUDE_CODE_VERSION`): ``claude -p --output-format json`` with the prompt on stdin, and

- ``--model M`` (the call's model, else the preset's), ``--effort low|medium|high|xhigh|max`` (the
  call's ``effort`` as given), ``--append-system-prompt TEXT`` (the agent definition's system
  prompt, appended so Claude Code keeps its own tool instructions) and ``--allowedTools A,B``
  (the definition's tool allowlist, when it restricts tools); then the preset's ``extra_args``;
- the answer, usage and cost come from the one JSON object it prints (``type: "result"``):
  ``result`` is the text, ``is_error: true`` or a ``subtype`` other than ``success`` is a failed
  child, ``usage`` gives the tokens (``input_tokens`` here counts every input token: Claude's
  uncached ``input_tokens`` plus ``cache_creation_input_tokens`` and
  ``cache_read_input_tokens``, which are also the cache write and read counts) and
  ``total_cost_usd`` is the cost the CLI reports, which wins over any price look-up.

:class:`CodexProvider` follows the **Codex CLI**'s non-interactive exec mode as its source
defines it in ``codex-rs/exec/src/cli.rs`` and ``exec_events.rs`` (openai/codex, December 2026;
:data:`CODEX_VERSION`): ``codex exec --json --skip-git-repo-check ... -`` with the prompt on
stdin, and

- ``-m M`` (the call's model, else the preset's), ``-c model_reasoning_effort="..."`` (``low``,
  ``medium``, ``high``, ``xhigh``; ``max`` → ``xhigh``), ``-c developer_instructions="..."`` (the agent
  definition's system prompt) and ``--sandbox read-only`` when the definition's tool allowlist
  has no tool that writes (``Edit``, ``Write``, ``MultiEdit``, ``NotebookEdit``, ``Bash``) or
  ``--sandbox workspace-write`` when it has one (Codex has no per-tool allowlist; without a
  definition that restricts tools, Codex's own configuration decides); then ``extra_args``;
- the answer is the last ``agent_message`` item of its JSON Lines events, the usage sums the
  ``turn.completed`` events' ``usage`` (``input_tokens`` includes ``cached_input_tokens``, the
  cache read count), and a ``turn.failed`` or ``error`` event is a failed child. Codex reports no
  cost: the usage is priced for the model through ``genai-prices`` (no cost when the model is not
  named or not in the price data).

A schema call asks for the JSON in the prompt (neither CLI has a JSON-Schema option in its
one-shot JSON mode that both share), and the answer is checked against the schema as
:class:`CommandProvider` checks a command's stdout. The environment is ``PATH``, ``HOME``,
``USER``, ``LANG``, ``TMPDIR`` and every ``ANTHROPIC_*``, ``CLAUDE_*``, ``CODEX_*`` and
``OPENAI_*`` variable of the host (the CLIs need their configuration and credentials), unless
``env`` is given.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import JsonValue

from .._subagent import ProviderInfo, SubagentRequest, SubagentResult, Usage
from .command import CommandProvider
from .structured import parse_structured_reply

__all__ = ["CLAUDE_CODE_VERSION", "CODEX_VERSION", "ClaudeCodeProvider", "CodexProvider",
           "agent_cli_env"]

#: The Claude Code release whose flags and JSON output :class:`ClaudeCodeProvider` follows.
CLAUDE_CODE_VERSION = "2.1"
#: The Codex CLI whose ``exec`` flags and events :class:`CodexProvider` follows.
CODEX_VERSION = "openai/codex main of December 2026"

_ENV_NAMES = ("PATH", "HOME", "USER", "LANG", "TMPDIR")
_ENV_PREFIXES = ("ANTHROPIC_", "CLAUDE_", "CODEX_", "OPENAI_")
_WRITING_TOOLS = frozenset({"Edit", "Write", "MultiEdit", "NotebookEdit", "Bash"})
_CODEX_EFFORT = {"low": "low", "medium": "medium", "high": "high", "xhigh": "xhigh", "max": "xhigh"}
_TAIL = 2000


def agent_cli_env(source: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment an agent CLI child gets by default (see the module docstring)."""
    source = os.environ if source is None else source
    env = {name: source[name] for name in _ENV_NAMES if name in source}
    env.update({name: value for name, value in source.items() if name.startswith(_ENV_PREFIXES)})
    env.setdefault("PATH", os.defpath)
    return env


def _schema_prompt(request: SubagentRequest) -> str:
    if request.schema is None:
        return request.prompt
    return (f"{request.prompt}\n\nAnswer with one JSON value only (no prose, no code fence) "
            "that satisfies this JSON Schema:\n"
            + json.dumps(request.schema, ensure_ascii=False))


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _failed(reason: str, stderr: bytearray, usage: Usage | None = None) -> SubagentResult:
    tail = stderr.decode("utf-8", errors="replace")[-_TAIL:].strip()
    return SubagentResult(stop_reason="error", usage=usage,
                          error=f"{reason}; stderr: {tail}" if tail else reason)


def _answered(request: SubagentRequest, text: str, usage: Usage | None) -> SubagentResult:
    if request.schema is None:
        return SubagentResult(stop_reason="completed", text=text, usage=usage)
    value, violations = parse_structured_reply(text, request.schema)
    if violations:
        return SubagentResult(stop_reason="error", text=text, usage=usage,
                              error="the answer does not satisfy the schema: "
                                    + "; ".join(violations))
    return SubagentResult(stop_reason="completed", text=text, structured=value, usage=usage)


class _AgentCliProvider(CommandProvider):
    """What both presets share: the default model, extra arguments, the environment."""

    kind = "agent-cli"

    def __init__(self, executable: str, *, model: str | None = None,
                 extra_args: Sequence[str] = (), env: Mapping[str, str] | None = None,
                 cwd: str | os.PathLike[str] | None = None, timeout_s: float | None = None,
                 max_output_bytes: int = 10_000_000, kill_grace_s: float = 2.0,
                 worktree_dir: str | os.PathLike[str] | None = None) -> None:
        super().__init__([executable], env=agent_cli_env() if env is None else env, cwd=cwd,
                         timeout_s=timeout_s, max_output_bytes=max_output_bytes,
                         kill_grace_s=kill_grace_s, worktree_dir=worktree_dir)
        self.executable = executable
        self.model = model
        self.extra_args = tuple(extra_args)

    @property
    def identity(self) -> str:
        """The CLI, its default model, extra arguments and folder (durable runs' keys)."""
        return f"{self.kind} " + json.dumps([self.executable, self.model, list(self.extra_args),
                                             None if self.cwd is None else os.fspath(self.cwd)])

    @property
    def info(self) -> ProviderInfo:
        """What this preset declares: its kind (``claude``/``codex``), the default model, and
        the executable, model, extra arguments and folder as its record."""
        return ProviderInfo(kind=self.kind, identity=self.identity, default_model=self.model,
                            description=self.description, record=self._record())

    def _record(self) -> dict[str, JsonValue]:
        record: dict[str, JsonValue] = {"kind": self.kind, "executable": self.executable,
                                        "extra_args": list(self.extra_args)}
        if self.model is not None:
            record["model"] = self.model
        if self.cwd is not None:
            record["cwd"] = os.fspath(self.cwd)
        return record

    def __repr__(self) -> str:
        return f"{type(self).__name__}(executable={self.executable!r}, model={self.model!r})"

    def _model(self, request: SubagentRequest) -> str | None:
        return request.model or self.model

    def _stdin(self, request: SubagentRequest) -> str:
        return _schema_prompt(request)


class ClaudeCodeProvider(_AgentCliProvider):
    """Claude Code in headless print mode as a child; its flags and output follow
    Claude Code 2.1 (:data:`CLAUDE_CODE_VERSION`; see the module docstring)."""

    kind = "claude"

    def __init__(self, executable: str = "claude", **options: Any) -> None:
        super().__init__(executable, **options)

    def _argv(self, request: SubagentRequest) -> list[str]:
        argv = [self.executable, "-p", "--output-format", "json"]
        model = self._model(request)
        if model:
            argv += ["--model", model]
        if request.effort is not None:
            argv += ["--effort", request.effort]
        agent = request.agent
        if agent is not None and agent.system_prompt:
            argv += ["--append-system-prompt", agent.system_prompt]
        if agent is not None and agent.tools is not None:
            argv += ["--allowedTools", ",".join(agent.tools)]
        return argv + list(self.extra_args)

    def _result(self, request: SubagentRequest, returncode: int | None, stdout: bytearray,
                stderr: bytearray, overflow: bool, timed_out: bool) -> SubagentResult:
        if overflow or timed_out:
            return super()._result(request, returncode, stdout, stderr, overflow, timed_out)
        reply = _claude_result(stdout)
        if reply is None:
            return _failed(f"claude printed no JSON result ({_exit_text(returncode)})", stderr)
        usage = _claude_usage(reply)
        text = reply.get("result")
        text = text if isinstance(text, str) else ""
        if reply.get("is_error") is True or reply.get("subtype", "success") != "success" \
                or returncode != 0:
            return _failed(f"claude failed ({reply.get('subtype', 'error')}, "
                           f"{_exit_text(returncode)}): {text}".rstrip(": "), stderr, usage)
        return _answered(request, text, usage)


def _exit_text(returncode: int | None) -> str:
    return f"exit status {returncode}"


def _claude_result(stdout: bytearray) -> dict[str, Any] | None:
    """The ``type: "result"`` object of Claude Code's JSON output (the whole stdout, or its
    last line that is one)."""
    text = stdout.decode("utf-8", errors="replace").strip()
    for candidate in (text, *reversed(text.splitlines())):
        try:
            value = json.loads(candidate)
        except ValueError:
            continue
        if isinstance(value, dict) and value.get("type") == "result":
            return value
    return None


def _claude_usage(reply: Mapping[str, Any]) -> Usage | None:
    usage = reply.get("usage")
    cost = reply.get("total_cost_usd")
    cost = float(cost) if isinstance(cost, int | float) and not isinstance(cost, bool) \
        and cost >= 0 else None
    if not isinstance(usage, dict):
        return None if cost is None else Usage(cost_usd=cost)
    read = _count(usage.get("cache_read_input_tokens"))
    write = _count(usage.get("cache_creation_input_tokens"))
    return Usage(input_tokens=_count(usage.get("input_tokens")) + read + write,
                 output_tokens=_count(usage.get("output_tokens")),
                 cache_read_tokens=read, cache_write_tokens=write, cost_usd=cost)


class CodexProvider(_AgentCliProvider):
    """Codex's non-interactive exec mode as a child; its flags and events follow the Codex CLI
    of openai/codex main of December 2026 (:data:`CODEX_VERSION`; see the module docstring)."""

    kind = "codex"

    def __init__(self, executable: str = "codex", **options: Any) -> None:
        super().__init__(executable, **options)

    def _argv(self, request: SubagentRequest) -> list[str]:
        argv = [self.executable, "exec", "--json", "--skip-git-repo-check"]
        model = self._model(request)
        if model:
            argv += ["-m", model]
        if request.effort is not None:
            argv += ["-c", f'model_reasoning_effort="{_CODEX_EFFORT[request.effort]}"']
        agent = request.agent
        if agent is not None and agent.system_prompt:
            # A TOML basic string: JSON's string escapes are valid TOML.
            argv += ["-c", "developer_instructions=" + json.dumps(agent.system_prompt)]
        if agent is not None and agent.tools is not None:
            writes = any(tool.split("(", 1)[0] in _WRITING_TOOLS for tool in agent.tools)
            argv += ["--sandbox", "workspace-write" if writes else "read-only"]
        return [*argv, *self.extra_args, "-"]

    def _result(self, request: SubagentRequest, returncode: int | None, stdout: bytearray,
                stderr: bytearray, overflow: bool, timed_out: bool) -> SubagentResult:
        if overflow or timed_out:
            return super()._result(request, returncode, stdout, stderr, overflow, timed_out)
        answer: str | None = None
        failure: str | None = None
        tokens = [0, 0, 0]  # input, cached input, output
        seen = False
        for line in stdout.decode("utf-8", errors="replace").splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if not isinstance(event, dict):
                continue
            kind = event.get("type")
            item = event.get("item")
            if kind == "item.completed" and isinstance(item, dict) \
                    and item.get("type") == "agent_message" and isinstance(item.get("text"), str):
                answer = item["text"]
            elif kind == "turn.completed" and isinstance(event.get("usage"), dict):
                usage = event["usage"]
                seen = True
                tokens[0] += _count(usage.get("input_tokens"))
                tokens[1] += _count(usage.get("cached_input_tokens"))
                tokens[2] += _count(usage.get("output_tokens"))
            elif kind in ("turn.failed", "error"):
                failure = _codex_error(event)
        usage = Usage(input_tokens=tokens[0], output_tokens=tokens[2],
                      cache_read_tokens=min(tokens[1], tokens[0])) if seen else None
        if failure is not None:
            return _failed(f"codex failed: {failure}", stderr, usage)
        if returncode != 0:
            return _failed(f"codex failed ({_exit_text(returncode)})", stderr, usage)
        if answer is None:
            return _failed("codex printed no agent_message", stderr, usage)
        return _answered(request, answer, usage)


def _codex_error(event: Mapping[str, Any]) -> str:
    error = event.get("error")
    found = error.get("message") if isinstance(error, dict) else None
    if isinstance(found, str):
        return found
    message = event.get("message")
    return message if isinstance(message, str) else json.dumps(event)[:_TAIL]

"""Agent command lines as children: presets of :class:`CommandProvider` for Claude Code and Codex.

Both run the agent CLI once per child, in its non-interactive mode, with everything else of
:class:`CommandProvider`'s contract (process group, timeout, output cap, cancellation,
``isolation: "worktree"`` — the child runs with its working directory in the fresh worktree).

:class:`ClaudeCodeProvider` follows **Claude Code 2.1**'s headless print mode
(:data:`CLAUDE_CODE_VERSION`): ``claude -p --output-format json`` with the prompt on stdin, and

- ``--model=M`` (the call's model, else the preset's), ``--effort=low|medium|high|xhigh|max``
  (the call's ``effort`` as given), ``--append-system-prompt=TEXT`` (the agent definition's
  system prompt, appended so Claude Code keeps its own tool instructions) and
  ``--allowedTools=A,B`` (the definition's tool allowlist, when it restricts tools); then the
  preset's ``extra_args``. Each value is joined to its flag, so a script's value that begins
  with ``-`` stays that flag's value (the CLI then refuses it as it would any unknown model),
  never an option;
- the answer, usage and cost come from the one JSON object it prints (``type: "result"``):
  ``result`` is the text, ``is_error: true`` or a ``subtype`` other than ``success`` is a failed
  child, ``usage`` gives the tokens (``input_tokens`` here counts every input token: Claude's
  uncached ``input_tokens`` plus ``cache_creation_input_tokens`` and
  ``cache_read_input_tokens``, which are also the cache write and read counts),
  ``total_cost_usd`` is the cost the CLI reports, which wins over any price look-up (a cost
  that is not a finite number from 0, such as ``1e999``, fails the child), and the model that
  answered is the ``modelUsage`` entry with the most output tokens (the result's ``model``);

:class:`CodexProvider` follows the **Codex CLI**'s non-interactive exec mode as its source
defines it in ``codex-rs/exec/src/cli.rs`` and ``exec_events.rs`` (openai/codex, December 2026;
:data:`CODEX_VERSION`): ``codex exec --json --skip-git-repo-check ... -`` with the prompt on
stdin, and

- ``--model=M`` (the call's model, else the preset's), ``--config=model_reasoning_effort="..."``
  (``low``, ``medium``, ``high``, ``xhigh``; ``max`` → ``xhigh``),
  ``--config=developer_instructions="..."`` (the agent definition's system prompt, a TOML
  basic string escaped by :func:`toml_string`) and ``--sandbox=read-only`` when the
  definition's tool allowlist has no tool that writes (``Edit``, ``Write``, ``MultiEdit``,
  ``NotebookEdit``, ``Bash``) or ``--sandbox=workspace-write`` when it has one (Codex has no
  per-tool allowlist; without a
  definition that restricts tools, Codex's own configuration decides); then ``extra_args``;
- the answer is the last ``agent_message`` item of its JSON Lines events, the usage sums the
  ``turn.completed`` events' ``usage`` (``input_tokens`` includes ``cached_input_tokens``, the
  cache read count), and a ``turn.failed`` or ``error`` event is a failed child. Codex reports no
  cost and not the model that answered: the engine prices the usage for the call's model, else
  the preset's (docs/embedding.md, "Cost in money").

A schema call asks for the JSON in the prompt (neither CLI has a JSON-Schema option in its
one-shot JSON mode that both share), and the answer is checked against the schema as
:class:`CommandProvider` checks a command's stdout. The environment is ``PATH``, ``HOME``,
``USER``, ``LANG``, ``TMPDIR`` and every ``ANTHROPIC_*``, ``CLAUDE_*``, ``CODEX_*`` and
``OPENAI_*`` variable of the host (the CLIs need their configuration and credentials), unless
``env`` is given.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import JsonValue

from .._depth import loads_bounded
from .._failure import argv_secrets, redact_argv
from .._subagent import ErrorKind, ProviderInfo, SubagentRequest, SubagentResult, Usage
from .command import CommandProvider
from .structured import parse_structured_reply

__all__ = ["CLAUDE_CODE_VERSION", "CODEX_VERSION", "ClaudeCodeProvider", "CodexProvider",
           "agent_cli_env", "reset_said", "said_kind", "toml_string"]

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


_TOML_ESCAPES = {"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r",
                 '"': '\\"', "\\": "\\\\"}


def _toml_char(char: str) -> str:
    code = ord(char)
    if char in _TOML_ESCAPES:
        return _TOML_ESCAPES[char]
    if code < 0x20 or 0x7F <= code <= 0x9F:
        return f"\\u{code:04X}"
    if 0xD800 <= code <= 0xDFFF:  # half an emoji: no TOML string can hold it
        return "\uFFFD"
    return char


def toml_string(text: str) -> str:
    """``text`` as a TOML basic string (``"..."``): ``"``, ``\\`` and control characters
    escaped (``\\n``, ``\\uXXXX``), every other character as itself (JSON's ``\\ud83d``
    surrogate pairs are not TOML); a lone surrogate, which no TOML string can hold, becomes
    U+FFFD."""
    return '"' + "".join(_toml_char(char) for char in text) + '"'


def _schema_prompt(request: SubagentRequest) -> str:
    if request.schema is None:
        return request.prompt
    return (f"{request.prompt}\n\nAnswer with one JSON value only (no prose, no code fence) "
            "that satisfies this JSON Schema:\n"
            + json.dumps(request.schema, ensure_ascii=False))


def _count(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _failed(reason: str, stderr: bytearray, usage: Usage | None = None,
            kind: ErrorKind | None = None, retry_at: datetime | None = None) -> SubagentResult:
    """A failed child; ``kind`` None: classified from the reason and stderr's words."""
    tail = stderr.decode("utf-8", errors="replace")[-_TAIL:].strip()
    return SubagentResult(stop_reason="error", usage=usage,
                          error_kind=kind or said_kind(f"{reason}\n{tail}"), retry_at=retry_at,
                          error=f"{reason}; stderr: {tail}" if tail else reason)


#: What an agent CLI's error words mean, first match wins (both CLIs print an API's error
#: message: Claude Code's "Invalid API key · Please run /login", Codex's "unexpected status 401
#: Unauthorized", "You've hit your usage limit", "exceeded retry limit, last status: 429").
_SAID: tuple[tuple[ErrorKind, re.Pattern[str]], ...] = (
    ("auth", re.compile(r"(?i)invalid api key|please run /login|\b401\b|unauthori[sz]ed|"
                        r"authentication_error|not logged in|invalid x-api-key|\b403\b|"
                        r"forbidden|oauth token (?:has )?expired")),
    ("limit", re.compile(r"(?i)usage limit|hit your limit|usage_limit_reached|"
                         r"insufficient_quota|quota exceeded|out of credits|credit balance")),
    ("not_found", re.compile(r"(?i)model_not_found|\b404\b|model .{0,80}(?:not found|does not "
                             r"exist|not supported)|no such model|unknown model")),
    ("rate_limited", re.compile(r"(?i)rate.?limit|\b429\b|too many requests")),
    ("overloaded", re.compile(r"(?i)overloaded|\b529\b|\b503\b|service unavailable")),
    ("server", re.compile(r"(?i)\b50[0248]\b|internal server error|bad gateway|api_error")),
    ("network", re.compile(r"(?i)stream disconnected|error sending request|connection (?:refused|"
                           r"reset|error)|timed out connecting|dns error|network error")),
)


def said_kind(text: str) -> ErrorKind:
    """The :data:`~dsh_workflow.ErrorKind` an agent CLI's error text says (``other`` when its
    words match none)."""
    for kind, pattern in _SAID:
        if pattern.search(text):
            return kind
    return "other"


def _status_kind(status: int) -> ErrorKind:
    """Claude Code's ``api_error_status`` (the API's HTTP status) as an error kind."""
    if status in (401, 403):
        return "auth"
    if status == 404:
        return "not_found"
    if status == 429:
        return "rate_limited"
    if status in (503, 529):
        return "overloaded"
    if status >= 500:
        return "server"
    return "bad_request" if status >= 400 else "other"


def _epoch(value: object) -> datetime | None:
    """An epoch time in seconds (or milliseconds) as an aware datetime; None when not one."""
    if isinstance(value, str) and value.strip().isdigit():
        value = int(value.strip())
    if not isinstance(value, int | float) or isinstance(value, bool) or value <= 0:
        return None
    seconds = value / 1000 if value > 10**11 else value
    try:
        return datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, OSError, ValueError):
        return None


#: Claude Code's usage-limit message with its reset time: ``Claude AI usage limit
#: reached|1767225600``.
_LIMIT_RESET = re.compile(r"(?i)limit reached\|(\d{9,13})")
#: A reset in so long: Codex's ``try again in 3 days 4 hours``.
_RESET_IN = re.compile(r"(?i)try again in\s+((?:\d+\s*(?:days?|hours?|minutes?|mins?|seconds?|"
                       r"secs?)[\s,]*(?:and\s+)?)+)")
_SPAN = re.compile(r"(?i)(\d+)\s*(d|h|m|s)")
#: A reset at a time of day, in a named zone or the user's own: Claude Code's ``resets 3pm
#: (Europe/London)``, Codex's ``try again at 3:45 PM``.
_RESET_AT = re.compile(r"(?i)(?:resets?|try again)(?:\s+at)?\s+(\d{1,2})(?::(\d{2}))?\s*"
                       r"([ap])\.?m\.?(?:\s*\(([A-Za-z_]+(?:/[A-Za-z_+-]+)*)\))?")


def reset_said(text: str, now: datetime | None = None) -> datetime | None:
    """The reset time an agent CLI's limit message names (an aware datetime), or None: an epoch
    after ``limit reached|``, a span after ``try again in`` (days, hours, minutes, seconds), or
    a time of day after ``resets`` / ``try again at`` (in the zone named in parentheses, else
    the local one; the next such time after ``now``)."""
    now = now or datetime.now(UTC)
    found = _LIMIT_RESET.search(text)
    if found:
        return _epoch(found.group(1))
    span = _RESET_IN.search(text)
    if span:
        units = {"d": 86400, "h": 3600, "m": 60, "s": 1}
        seconds = sum(int(n) * units[u.lower()] for n, u in _SPAN.findall(span.group(1)))
        try:
            return now + timedelta(seconds=seconds)
        except OverflowError:  # no date that far: no reset time worth keeping
            return None
    at = _RESET_AT.search(text)
    if at is None:
        return None
    hour, minute = int(at.group(1)), int(at.group(2) or 0)
    if not (1 <= hour <= 12 and minute < 60):
        return None
    hour = hour % 12 + (12 if at.group(3).lower() == "p" else 0)
    zone: tzinfo | None = None
    if at.group(4):
        try:
            zone = ZoneInfo(at.group(4))
        except (ZoneInfoNotFoundError, ValueError):
            zone = None
    local = now.astimezone(zone)  # None: the machine's own zone
    moment = local.replace(hour=hour, minute=minute, second=0, microsecond=0)
    if moment <= local:
        moment += timedelta(days=1)
    return moment.astimezone(UTC)


def _answered(request: SubagentRequest, text: str, usage: Usage | None) -> SubagentResult:
    if request.schema is None:
        return SubagentResult(stop_reason="completed", text=text, usage=usage)
    value, violations = parse_structured_reply(text, request.schema)
    if violations:
        # The engine validates the parsed value (None: not JSON) and says what is wrong.
        return SubagentResult(stop_reason="error", text=text, usage=usage, structured=value,
                              error_kind="invalid_answer",
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
        """The CLI, its default model, extra arguments (secrets redacted) and folder (durable
        runs' keys)."""
        return f"{self.kind} " + json.dumps([self.executable, self.model,
                                             redact_argv(self.extra_args),
                                             None if self.cwd is None else os.fspath(self.cwd)])

    @property
    def info(self) -> ProviderInfo:
        """What this preset declares: its kind (``claude``/``codex``), the default model, and
        the executable, model, extra arguments (secrets redacted) and folder as its record,
        the values after secret-looking flags of its extra arguments as its secrets."""
        return ProviderInfo(kind=self.kind, identity=self.identity, default_model=self.model,
                            description=self.description, record=self._record(),
                            secrets=argv_secrets(self.extra_args))

    def _record(self) -> dict[str, JsonValue]:
        record: dict[str, JsonValue] = {"kind": self.kind, "executable": self.executable,
                                        "extra_args": list(redact_argv(self.extra_args))}
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
        # Every chosen value is joined to its flag (--flag=VALUE): a value beginning with "-"
        # stays that flag's value, never an option of its own.
        argv = [self.executable, "-p", "--output-format", "json"]
        model = self._model(request)
        if model:
            argv.append(f"--model={model}")
        if request.effort is not None:
            argv.append(f"--effort={request.effort}")
        agent = request.agent
        if agent is not None and agent.system_prompt:
            argv.append(f"--append-system-prompt={agent.system_prompt}")
        if agent is not None and agent.tools is not None:
            argv.append("--allowedTools=" + ",".join(agent.tools))
        return argv + list(self.extra_args)

    def _result(self, request: SubagentRequest, returncode: int | None, stdout: bytearray,
                stderr: bytearray, overflow: bool, timed_out: bool) -> SubagentResult:
        if overflow or timed_out:
            return super()._result(request, returncode, stdout, stderr, overflow, timed_out)
        reply = _claude_result(stdout)
        reset = _claude_reset(stdout)
        if reply is None:
            reason = f"claude printed no JSON result ({_exit_text(returncode)})"
            if reset is not None:
                return _failed(reason, stderr, kind="limit", retry_at=reset)
            return _failed(reason, stderr)
        usage = _claude_usage(reply)
        if isinstance(usage, str):
            return _failed(usage, stderr).model_copy(update={"error_kind": "invalid_answer"})
        text = reply.get("result")
        text = text if isinstance(text, str) else ""
        if reply.get("is_error") is True or reply.get("subtype", "success") != "success" \
                or returncode != 0:
            kind, retry_at = _claude_kind(reply, text, reset)
            reason = f"{text} (claude: {reply.get('subtype', 'error')}, " \
                     f"{_exit_text(returncode)})" if text.strip() else \
                     f"claude failed ({reply.get('subtype', 'error')}, {_exit_text(returncode)})"
            return _failed(reason, stderr, usage, kind=kind, retry_at=retry_at)
        return _answered(request, text, usage)

    def _answering_model(self, stdout: bytearray) -> str | None:
        reply = _claude_result(stdout)
        return None if reply is None else _claude_model(reply)


def _claude_kind(reply: Mapping[str, Any], text: str,
                 reset: datetime | None) -> tuple[ErrorKind | None, datetime | None]:
    """What Claude Code's failed result says: a usage limit with its reset time (from the
    message, ``...limit reached|<epoch>``, or a rejecting ``rate_limit_event``) is ``limit``;
    else ``api_error_status``; else its words (None: classified from them with stderr's)."""
    at = reset_said(text) if said_kind(text) == "limit" else None
    if at is not None or (reset is not None and said_kind(text) in ("limit", "rate_limited",
                                                                   "other")):
        return "limit", at or reset
    status = reply.get("api_error_status")
    if isinstance(status, int) and not isinstance(status, bool):
        return _status_kind(status), None
    return None, None


def _claude_reset(stdout: bytearray) -> datetime | None:
    """The reset time of the last ``rate_limit_event`` line that rejected the request
    (``rate_limit_info.status`` ``rejected``, ``resetsAt`` an epoch time), if any."""
    reset = None
    for line in stdout.decode("utf-8", errors="replace").splitlines():
        if "rate_limit_event" not in line:
            continue
        try:
            event = json.loads(line)
        except ValueError:
            continue
        info = event.get("rate_limit_info") if isinstance(event, dict) else None
        if isinstance(info, dict) and info.get("status") == "rejected":
            reset = _epoch(info.get("resetsAt")) or reset
    return reset


def _exit_text(returncode: int | None) -> str:
    return f"exit status {returncode}"


def _claude_result(stdout: bytearray) -> dict[str, Any] | None:
    """The ``type: "result"`` object of Claude Code's JSON output (the whole stdout, or its
    last line that is one)."""
    text = stdout.decode("utf-8", errors="replace").strip()
    for candidate in (text, *reversed(text.splitlines())):
        try:
            value = loads_bounded(candidate)
        except ValueError:
            continue
        if isinstance(value, dict) and value.get("type") == "result":
            return value
    return None


def _claude_model(reply: Mapping[str, Any]) -> str | None:
    """The model that answered: the ``modelUsage`` key with the most output tokens (Claude
    Code may also call a small model for its own chores), None when it reports none."""
    found = reply.get("modelUsage")
    if not isinstance(found, dict):
        return None
    models = [(_count(entry.get("outputTokens")) if isinstance(entry, dict) else 0, name)
              for name, entry in found.items() if isinstance(name, str) and name.strip()]
    return max(models)[1].strip()[:200] if models else None


def _claude_usage(reply: Mapping[str, Any]) -> Usage | str | None:
    """The usage Claude Code reports, or why its cost cannot be one (not a finite amount
    from 0: ``1e999`` parses as infinity)."""
    usage = reply.get("usage")
    cost = reply.get("total_cost_usd")
    if isinstance(cost, int | float) and not isinstance(cost, bool):
        try:
            cost = float(cost)
        except OverflowError:  # an integer past a float's range
            cost = math.inf
        if not (math.isfinite(cost) and cost >= 0):
            return f"claude reported a cost that cannot be counted: total_cost_usd={cost}"
    else:
        cost = None
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
        # Every chosen value is joined to its flag (--flag=VALUE): a value beginning with "-"
        # stays that flag's value, never an option of its own; --config values are TOML.
        argv = [self.executable, "exec", "--json", "--skip-git-repo-check"]
        model = self._model(request)
        if model:
            argv.append(f"--model={model}")
        if request.effort is not None:
            argv.append("--config=model_reasoning_effort="
                        + toml_string(_CODEX_EFFORT[request.effort]))
        agent = request.agent
        if agent is not None and agent.system_prompt:
            argv.append("--config=developer_instructions=" + toml_string(agent.system_prompt))
        if agent is not None and agent.tools is not None:
            writes = any(tool.split("(", 1)[0] in _WRITING_TOOLS for tool in agent.tools)
            argv.append("--sandbox=" + ("workspace-write" if writes else "read-only"))
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
                event = loads_bounded(line)
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
            retry_at = reset_said(failure) if said_kind(failure) == "limit" else None
            return _failed(f"codex failed: {failure}", stderr, usage, retry_at=retry_at)
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

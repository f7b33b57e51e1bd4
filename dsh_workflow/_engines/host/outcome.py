"""Where a run's final result is decided, and its error text rendered.

:func:`final_result` turns a run's :data:`~.stop.StopCause` into its one
:class:`~dsh_workflow.WorkflowResult`; :class:`ScriptText` renders a failed outcome's text and
rewrites stack-frame positions to the script's own lines (for results and logged errors).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..._config import EngineConfig
from ..._errors import ENGINE_FAILED, SCRIPT_FAILED, WorkflowErrorCode
from ..._meta import WorkflowMeta
from ..._result import WorkflowResult
from ..._subagent import Usage
from ..script.wire import Completed, Failed, InternalCode, warnings_of
from .stop import Cancelled, Fault, Parked, RuntimeEnded, StopCause, TimedOut

__all__ = ["CALLER_CANCELLED", "ScriptText", "cancel_message", "final_result"]

#: The reason of ``run.cancel()`` called without one: the origin is the caller.
CALLER_CANCELLED = "cancelled by the caller"

_CODES = {code.value for code in WorkflowErrorCode}
_AGENT_FAILED = WorkflowErrorCode.AGENT_FAILED
#: A QuickJS stack-frame line ("    at f (<input>:3:5)" or "    at <input>:3:5"): only such
#: lines are rewritten or dropped, never a message line that merely mentions a position.
_FRAME_LINE = re.compile(r"^\s+at (?:.* \()?<input>:(\d+):(\d+)\)?\s*$")
#: Texts only the engine writes; a script's own error text that starts so is marked as the
#: script's (see :meth:`ScriptText.error`).
_ENGINE_PREFIXES = (
    *(f"{code.value}:" for code in WorkflowErrorCode),
    "workflow runtime failed", "the script runtime", "the workflow run exceeded",
    "the workflow engine failed", "workflow run cancelled", "the script is waiting for a promise",
    "the sandbox process")


class ScriptText:
    """Renders a run's error text in terms of its script (``workflow:NAME:LINE:COL``).

    ``meta``: the run's (its name is read when a frame is rewritten); ``line_offset``: runtime
    lines before the body; ``header_chars``: the wrapper's characters before the body on its
    first line.
    """

    def __init__(self, meta: WorkflowMeta, line_offset: int, header_chars: int) -> None:
        self._meta = meta
        self._line_offset = line_offset
        self._header_chars = header_chars

    def error(self, outcome: Failed) -> str:
        """The error text of a failed outcome: never empty, and a script's own text never
        passes for the engine's (a head that starts like an engine text is marked)."""
        code = outcome.get("code")
        error = outcome.get("error")
        text = error if isinstance(error, str) else ""
        if code == InternalCode.STALLED:
            return text or "the script stalled"
        if isinstance(code, str) and code in _CODES:
            return f"{code}: {text or 'the engine gave no detail'}"
        if not text.strip():
            text = "the script threw an error whose text is empty"
        elif outcome.get("thrown") is True and text.startswith(_ENGINE_PREFIXES):
            text = "the script's own error: " + text
        stack = outcome.get("stack")
        if isinstance(stack, str) and stack:
            frames = self.frames(stack)
            if frames:
                text = text + "\n" + frames
        return text

    def frames(self, text: str) -> str:
        """Rewrite the positions of stack-frame lines to the script's own lines and drop the
        runtime's frames; every other line is kept as it is (blank lines go)."""
        name = self._meta.name
        lines: list[str] = []
        for line in text.split("\n"):
            found = _FRAME_LINE.match(line)
            if found is None:
                if line.strip():
                    lines.append(line)
                continue
            row, col = int(found.group(1)), int(found.group(2))
            if row <= self._line_offset:
                continue
            row -= self._line_offset
            if row == 1:
                col = max(1, col - self._header_chars)
            lines.append(line[: found.start(1) - len("<input>:")]
                         + f"workflow:{name}:{row}:{col}" + line[found.end(2):])
        return "\n".join(lines)


def _timeout_message(config: EngineConfig) -> str:
    return (f"the workflow run exceeded its wall-clock limit (run_timeout_s="
            f"{config.run_timeout_s:g})")


def cancel_message(cause: StopCause | None, config: EngineConfig,
                   fatal_agent: int | None = None) -> str:
    """Why a child the run's stop ended was cancelled (its ``AgentFailure`` message, and what
    its call throws in the script), in the user's words: the cancel's reason, which names its
    origin (``cancelled from the viewer``, ``cancelled by the caller``); the timeout; ``cancelled:
    the run ended with AGENT_FAILED in agent 3`` (the code that ended the run, and the agent
    whose failure ended it: the fault's, else ``fatal_agent``); ``cancelled: the script
    returned before this agent ended``."""
    if isinstance(cause, TimedOut):
        return _timeout_message(config)
    if isinstance(cause, Cancelled):
        reason = cause.reason
        return reason if reason.startswith("cancelled") else f"cancelled: {reason}"
    if isinstance(cause, Parked):
        return ("cancelled: the run parked on a provider's usage limit (a resume runs this "
                "agent again)" if cause.reason == "limit" else "cancelled: the run parked")
    code: WorkflowErrorCode | None = None
    agent = fatal_agent
    if isinstance(cause, Fault):
        code = cause.code
        agent = cause.agent if cause.agent is not None else fatal_agent
    elif isinstance(cause, RuntimeEnded) and cause.outcome is not None:
        if cause.outcome.get("ok") is True:
            return "cancelled: the script returned before this agent ended"
        code = outcome_code(cause.outcome)  # type: ignore[arg-type]  # ok is not True: a Failed
    if code is None:
        return "cancelled: the run stopped"
    where = f" in agent {agent}" if agent is not None and code is _AGENT_FAILED else ""
    return f"cancelled: the run ended with {code.value}{where}"


def outcome_code(outcome: Failed) -> WorkflowErrorCode:
    """The code of a failed outcome: the engine's code it names; else the script's failure
    when the script threw it or stalled; else (no code, not thrown: the runtime or the sandbox
    process failed) the engine's failure (see the table in ``dsh_workflow._errors``)."""
    code = outcome.get("code")
    if isinstance(code, str) and code in _CODES:
        return WorkflowErrorCode(code)
    if code == InternalCode.STALLED or outcome.get("thrown") is True:
        return SCRIPT_FAILED
    return ENGINE_FAILED


def _unbounded_result(cause: StopCause | None, started: int, text: ScriptText,
                      config: EngineConfig) -> WorkflowResult:
    """The result before its usage and error length are settled. Every non-completed result
    gets its code here, from what ended the run (never parsed back from its own text)."""
    if isinstance(cause, Cancelled):
        return WorkflowResult(stop_reason="cancelled", agents_started=started,
                              error=f"workflow run cancelled: {cause.reason}",
                              error_code=WorkflowErrorCode.CANCELLED)
    if isinstance(cause, TimedOut):
        return WorkflowResult(stop_reason="error", agents_started=started,
                              error=f"{WorkflowErrorCode.TIMEOUT.value}: "
                                    f"{_timeout_message(config)}",
                              error_code=WorkflowErrorCode.TIMEOUT)
    if isinstance(cause, Fault):
        return WorkflowResult(stop_reason="error", agents_started=started, error=cause.text,
                              error_code=cause.code)
    if isinstance(cause, Parked):
        return WorkflowResult(stop_reason="waiting", agents_started=started,
                              waiting_reason=cause.reason, pending=cause.pending,
                              resume_after=cause.resume_after)
    outcome = cause.outcome if isinstance(cause, RuntimeEnded) else None
    if outcome is None:
        return WorkflowResult(stop_reason="error", agents_started=started,
                              error="the script runtime stopped without a result",
                              error_code=ENGINE_FAILED)
    if outcome.get("ok") is True:
        completed: Completed = outcome  # type: ignore[assignment]  # ok is True: a Completed
        return WorkflowResult(stop_reason="completed", agents_started=started,
                              value=completed.get("value"), warnings=warnings_of(completed))
    failure: Failed = outcome  # type: ignore[assignment]  # ok is not True: a Failed
    return WorkflowResult(stop_reason="error", agents_started=started,
                          error=text.error(failure), error_code=outcome_code(failure))


def final_result(cause: StopCause | None, *, started: int, replayed: int, usage: Usage | None,
                 text: ScriptText, config: EngineConfig, failed: int = 0,
                 unpriced: int = 0, cancelled: int = 0,
                 warnings: Sequence[str] = (),
                 meta_notes: tuple[str, ...] = ()) -> WorkflowResult:
    """The run's one result for its stop cause: ``started`` children (``failed`` of them
    failed, ``cancelled`` were cancelled), ``replayed`` from the journal, ``usage`` reported
    (None: none), ``unpriced`` children whose cost is unknown, the host's ``warnings`` after
    the script's (a completed run's only); an error is cut at ``max_error_chars``.
    ``meta_notes`` (what the meta holds that the engine does not use) come first in its
    ``warnings``, whatever the run's end."""
    result = _unbounded_result(cause, started, text, config)
    if warnings and result.stop_reason == "completed":
        result = result.model_copy(update={"warnings": (*result.warnings, *warnings)})
    if meta_notes:
        result = result.model_copy(update={"warnings": (*meta_notes, *result.warnings)})
    if failed:
        result = result.model_copy(update={"agents_failed": failed})
    if cancelled:
        result = result.model_copy(update={"agents_cancelled": cancelled})
    if usage is not None:
        result = result.model_copy(update={"usage": usage})
    if unpriced:
        result = result.model_copy(update={"agents_unpriced": unpriced})
    if replayed:
        result = result.model_copy(update={"agents_replayed": replayed})
    cap = config.max_error_chars
    if result.error is not None and len(result.error) > cap:
        more = len(result.error) - cap
        result = result.model_copy(update={
            "error": result.error[:cap] + f"\n… [truncated: {more} more characters]"})
    return result

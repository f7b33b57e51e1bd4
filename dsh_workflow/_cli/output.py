"""What ``dsh-workflow`` writes: the one JSON document on stdout (UTF-8, whatever the locale)
and ``Error: <message>`` / ``warning: <message>`` lines on stderr."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dsh_workflow._events import AgentEnded

if TYPE_CHECKING:
    from dsh_workflow import WorkflowEvent, WorkflowResult

__all__ = ["ChildFailures", "error_line", "print_result", "result_document", "warning_line", "write_stdout"]


class ChildFailures:
    """A listener keeping every started child that did not complete, in the order they ended,
    as ``{seq, label, kind, cause, message}`` (``cause``: what the provider's backend said,
    None when it did not say; a cancelled child has kind ``cancelled``): the ``failures`` of
    ``run --json``."""

    def __init__(self) -> None:
        self.failures: list[dict[str, Any]] = []

    def __call__(self, event: WorkflowEvent) -> None:
        if isinstance(event, AgentEnded) and event.outcome != "completed":
            error = event.error
            self.failures.append({
                "seq": event.seq, "label": event.label,
                "kind": event.outcome if error is None else error.kind,
                "cause": None if error is None else error.cause,
                "message": "" if error is None else error.message})


def result_document(result: WorkflowResult, run_id: str, error: str | None,
                    failures: list[dict[str, Any]]) -> dict[str, Any]:
    """The whole result as ``run --json`` prints it: every field of the result at the top
    level (``usage`` with ``cost_usd``, None when unknown; ``warnings`` always a list), the
    ``failures`` and the ``run_id``."""
    document: dict[str, Any] = result.model_dump(mode="json")
    document["error"] = error
    document["usage"] = {"cost_usd": result.usage.cost_usd, **document["usage"]}
    document["warnings"] = list(result.warnings)
    document["failures"] = failures
    document["run_id"] = run_id
    return document


def print_result(result: WorkflowResult, run_id: str, *, as_json: bool,
                 limit_flags: Mapping[str, str] | None = None,
                 failures: list[dict[str, Any]] | None = None) -> None:
    """Write the run's JSON document to stdout and, when it did not complete, an error line.
    With ``--json`` the document is the whole result (:func:`result_document`, with
    ``failures``, the children that did not complete); a failed run's document without it is
    ``value``, ``stop_reason``, ``error``, ``error_code``, ``agents_started``, ``run_id``.
    An error that names a limit set by a flag (``limit_flags``: setting -> ``"--budget 150"``)
    names the flag too, in both. Each of the result's warnings follows on stderr as a
    ``warning: ...`` line (and, without ``--json``, in a failed run's ``warnings`` list,
    present only when there are any)."""
    error = result.error
    if error is not None and limit_flags:
        from .options import name_limit_flags

        error = name_limit_flags(error, limit_flags)
    document: Any = result.value
    if as_json:
        document = result_document(result, run_id, error, failures or [])
    elif result.stop_reason != "completed":
        document = {"value": result.value, "stop_reason": result.stop_reason,
                    "error": error, "error_code": result.error_code,
                    "agents_started": result.agents_started, "run_id": run_id}
        if result.warnings:
            document["warnings"] = list(result.warnings)
    write_stdout(json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    for warning in result.warnings:
        warning_line(warning)
    if result.stop_reason == "cancelled":
        error = error or ""
        error_line(error if "cancel" in error.lower() else f"workflow run was cancelled: {error}")
    elif result.stop_reason == "error":
        error_line(f"workflow run failed: {error}")


def write_stdout(text: str) -> None:
    buffer = getattr(sys.stdout, "buffer", None)
    sys.stdout.flush()
    if buffer is None:
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    buffer.write(text.encode("utf-8"))  # JSON is UTF-8, whatever the locale
    buffer.flush()


def warning_line(message: str) -> None:
    """One ``warning: <message>`` line on stderr (a lossy step of the return value's
    conversion to JSON, docs/scripts.md "The return value")."""
    sys.stderr.write(f"warning: {message}\n")
    sys.stderr.flush()


def error_line(message: str) -> None:
    sys.stderr.write(f"Error: {message}\n")
    sys.stderr.flush()

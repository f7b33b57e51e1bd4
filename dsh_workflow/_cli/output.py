"""What ``dsh-workflow`` writes: the one JSON document on stdout (UTF-8, whatever the locale)
and ``Error: <message>`` / ``warning: <message>`` lines on stderr."""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dsh_workflow import WorkflowResult

__all__ = ["error_line", "print_result", "warning_line", "write_stdout"]


def print_result(result: WorkflowResult, run_id: str, *, as_json: bool,
                 limit_flags: Mapping[str, str] | None = None) -> None:
    """Write the run's JSON document to stdout and, when it did not complete, an error line.
    The document of a failed run, or any with ``--json``, is the result without its usage:
    ``value``, ``stop_reason``, ``error``, ``error_code``, ``agents_started``, ``run_id``.
    An error that names a limit set by a flag (``limit_flags``: setting -> ``"--budget 150"``)
    names the flag too, in both. Each of the result's warnings follows on stderr as a
    ``warning: ...`` line (and, with ``--json``, in the document's ``warnings`` list, present
    only when there are any)."""
    error = result.error
    if error is not None and limit_flags:
        from .options import name_limit_flags

        error = name_limit_flags(error, limit_flags)
    document: Any = result.value
    if as_json or result.stop_reason != "completed":
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

"""What ``dsh-workflow`` writes: the one JSON document on stdout (UTF-8, whatever the locale)
and ``Error: <message>`` / ``warning: <message>`` lines on stderr.

The output boundary (docs/cli.md, "Hostile text"): everything the command line writes to its
terminal passes :func:`dsh_workflow._text.escape_controls` once — :func:`write_stdout`, the
``Error:``/``warning:`` lines, and, while :func:`terminal_streams` is in force (``main()``),
every other write to ``sys.stdout`` and ``sys.stderr``. Text UTF-8 cannot hold becomes U+FFFD;
on stdout a ``warning:`` line says so. The live panel draws through the real stream (its own
escape sequences are its drawing) and escapes what it shows with :func:`for_terminal`.
"""

from __future__ import annotations

import contextlib
import json
import sys
from collections.abc import Iterator, Mapping
from typing import IO, TYPE_CHECKING, Any, TypeVar

from .._text import LONE_SURROGATE, escape_controls, valid_text

if TYPE_CHECKING:
    from dsh_workflow import WorkflowEvent, WorkflowResult

__all__ = ["ChildFailures", "error_line", "for_terminal", "print_result", "result_document",
           "terminal_streams", "unescaped", "warning_line", "write_stdout"]

_T = TypeVar("_T")


class ChildFailures:
    """A listener keeping every started child that did not complete, in the order they ended,
    as ``{seq, label, kind, cause, message}`` (``cause``: what the provider's backend said,
    None when it did not say; a cancelled child has kind ``cancelled``): the ``failures`` of
    ``run --json``."""

    def __init__(self) -> None:
        from dsh_workflow import AgentEnded  # loaded once a run is made (start-up time)

        self._ended = AgentEnded
        self.failures: list[dict[str, Any]] = []

    def __call__(self, event: WorkflowEvent) -> None:
        if isinstance(event, self._ended) and event.outcome != "completed":
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
    ``value``, ``stop_reason``, ``error``, ``error_code``, ``agents_started``, ``run_id`` (and a
    parked run's ``waiting_reason``, ``pending`` and ``resume_after``).
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
        if result.stop_reason == "waiting":  # a parked run: why, and what it waits for
            waiting = result.model_dump(mode="json", include={"waiting_reason", "pending",
                                                              "resume_after"})
            document.update(waiting)
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
    """Write ``text`` (a JSON document or the lines of a command) to stdout as UTF-8, its
    controls escaped (valid inside JSON strings too); a lone surrogate becomes U+FFFD and a
    ``warning:`` line on stderr says so."""
    valid = valid_text(text)
    if valid is not text:
        warning_line(f"standard output: {LONE_SURROGATE}")
    text = escape_controls(valid)
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
    sys.stderr.write(f"warning: {escape_controls(message)}\n")
    sys.stderr.flush()


def error_line(message: str) -> None:
    sys.stderr.write(f"Error: {escape_controls(message)}\n")
    sys.stderr.flush()


class _Escaping:
    """A text stream whose writes pass :func:`escape_controls`; the rest is the wrapped one's."""

    def __init__(self, stream: IO[str]) -> None:
        self.unescaped = stream

    def write(self, text: str) -> int:
        self.unescaped.write(escape_controls(text))
        return len(text)

    def writelines(self, lines: Iterator[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.unescaped, name)


def unescaped(stream: IO[str]) -> IO[str]:
    """The real stream under ``stream`` (for a writer that draws with escape sequences of its
    own and escapes its text itself)."""
    return stream.unescaped if isinstance(stream, _Escaping) else stream


@contextlib.contextmanager
def terminal_streams() -> Iterator[None]:
    """While in force, every write to ``sys.stdout`` and ``sys.stderr`` is escaped for a
    terminal; the streams are put back afterwards."""
    saved = sys.stdout, sys.stderr
    sys.stdout = _Escaping(unescaped(saved[0]))
    sys.stderr = _Escaping(unescaped(saved[1]))
    try:
        yield
    finally:
        sys.stdout, sys.stderr = saved


def for_terminal(value: _T) -> _T:
    """``value`` (an event, a model, text, data) with every string in it passed through
    :func:`escape_controls`; unchanged parts are shared, an unchanged value is returned itself."""
    from pydantic import BaseModel  # not at import: `--help` loads no heavy package

    if isinstance(value, str):
        return escape_controls(value)  # type: ignore[return-value]  # str in, str out
    if isinstance(value, BaseModel):
        updates = {name: made for name in type(value).model_fields
                   if (made := for_terminal(getattr(value, name))) is not getattr(value, name)}
        return value.model_copy(update=updates) if updates else value
    if isinstance(value, (list, tuple)):
        items = [for_terminal(item) for item in value]
        if all(new is old for new, old in zip(items, value, strict=True)):
            return value
        return type(value)(items)
    if isinstance(value, dict):
        pairs = [(key, item, for_terminal(key), for_terminal(item)) for key, item in value.items()]
        if all(new_key is key and new is item for key, item, new_key, new in pairs):
            return value
        return {new_key: new for _, _, new_key, new in pairs}  # type: ignore[return-value]  # a dict in, a dict out
    return value

"""The failed children of the tool's runs, for the model (docs/scripts.md, "Truthful outcomes").

:class:`FailureLog` listens to the engine's events and keeps the reasons (``AgentEnded.error``)
of the runs the tool started; :func:`failures_line` is the one line a completed run's text
ends with when any child failed (``Agents failed: 3 of 12 — 2 invalid (/number: does not
match '^INV-\\d{4}$'), 1 timeout.``); :func:`failures_data` the list the result's ``data``
carries.
"""

from __future__ import annotations

from typing import Any

from .._events import AgentEnded, WorkflowEvent
from .._failure import AgentFailure, group_failures

__all__ = ["MAX_LISTED_FAILURES", "FailureLog", "failures_data", "failures_line"]

#: Most failures listed in a result's ``data`` (the count is always whole).
MAX_LISTED_FAILURES = 100
_MAX_LINE_CHARS = 600


class FailureLog:
    """Collects ``(seq, label, outcome, reason)`` of failed children of watched runs."""

    def __init__(self) -> None:
        self._runs: dict[str, list[dict[str, Any]]] = {}

    def watch(self, run_id: str) -> None:
        """Keep the failures of ``run_id`` (call right after ``start()``)."""
        self._runs.setdefault(run_id, [])

    def take(self, run_id: str) -> list[dict[str, Any]]:
        """The failures of ``run_id`` in end order, forgetting them."""
        return self._runs.pop(run_id, [])

    def on_event(self, event: WorkflowEvent) -> None:
        if not isinstance(event, AgentEnded) or event.outcome == "completed":
            return
        kept = self._runs.get(event.run.id)
        if kept is None:
            return
        failure = event.error or AgentFailure.of("provider" if event.outcome == "failed"
                                                 else event.outcome, event.outcome)
        kept.append({"seq": event.seq, "label": event.label, "phase": event.phase,
                     "outcome": event.outcome, **failure.model_dump(mode="json")})


def failures_line(failures: list[dict[str, Any]], started: int) -> str | None:
    """``Agents failed: <n> of <started> — <count> <kind> (<reason>), ...`` grouped by kind and
    reason, most frequent first (a reason only for kinds whose message explains more than the
    kind); when children were cancelled, the head counts them apart: ``Agents failed: 2
    failed, 1 cancelled of 12 — ...`` (``Agents cancelled: 1 of 12 — ...`` when none failed).
    None when no child failed or was cancelled. Bounded to 600 characters."""
    if not failures:
        return None
    parts = [f"{count} {kind}" + (f" ({reason})" if reason else "")
             for count, kind, reason in group_failures(failures)]
    cancelled = sum(1 for failure in failures if failure.get("outcome") == "cancelled")
    total = max(started, len(failures))
    failed = len(failures) - cancelled
    if not cancelled:
        head = f"Agents failed: {failed} of {total} — "
    elif not failed:
        head = f"Agents cancelled: {cancelled} of {total} — "
    else:
        head = f"Agents failed: {failed} failed, {cancelled} cancelled of {total} — "
    line = head + ", ".join(parts) + "."
    if len(line) > _MAX_LINE_CHARS:
        line = line[: _MAX_LINE_CHARS - 2] + "…."
    return line


def failures_data(failures: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The failures a result's ``data`` lists (the first :data:`MAX_LISTED_FAILURES`)."""
    return failures[:MAX_LISTED_FAILURES]

"""The failed children of the tool's runs, for the model (README, "Truthful outcomes").

:class:`FailureLog` listens to the engine's events and keeps the reasons (``AgentEnded.error``)
of the runs the tool started; :func:`failures_line` is the one line a completed run's text
ends with when any child failed (``Agents failed: 3 of 12 — 2 invalid (/number: does not
match '^INV-\\d{4}$'), 1 timeout.``); :func:`failures_data` the list the result's ``data``
carries.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

from .._events import AgentEnded, WorkflowEvent
from .._failure import AgentFailure

__all__ = ["MAX_LISTED_FAILURES", "FailureLog", "failure_reason", "failures_data",
           "failures_line", "group_failures"]

#: Most failures listed in a result's ``data`` (the count is always whole).
MAX_LISTED_FAILURES = 100
_MAX_REASON_CHARS = 120
_MAX_LINE_CHARS = 600
#: Kinds whose message says something beyond the kind itself.
_EXPLAINED = ("provider", "invalid", "missing")
#: A validator message's offending value (``/number: 'INV-12' does not match ...``): dropped in
#: the summary so that equal reasons of different values group together.
_VALUE = re.compile(
    r"^(?P<path>/\S*): (?:'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|-?\d[\w.+-]*|True|False|None"
    r"|\[.*?\]|\{.*?\}) (?=does not match|is not of type|is not one of|is not valid|is too "
    r"|is less than|is greater than|is not a |was expected|is not allowed|should not)")


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


def failure_reason(failure: dict[str, Any], *, keep_value: bool = False,
                   limit: int = _MAX_REASON_CHARS) -> str:
    """What a failure says after its kind: its first detail or message line (without the
    offending value unless ``keep_value``), bounded to ``limit`` characters."""
    details = failure.get("details") or []
    text = details[0] if details else str(failure.get("message", ""))
    text = text.split("\n", 1)[0]
    if not keep_value:
        text = _VALUE.sub(r"\g<path>: ", text)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _reason(failure: dict[str, Any]) -> str:
    return failure_reason(failure)


def group_failures(failures: list[dict[str, Any]], *,
                   kinds: tuple[str, ...] = _EXPLAINED) -> list[tuple[int, str, str]]:
    """``(count, kind, reason)`` groups, most frequent first (first seen first among equals);
    the reason is empty for kinds not in ``kinds``."""
    groups: Counter[tuple[str, str]] = Counter()
    for failure in failures:
        kind = str(failure.get("kind"))
        groups[(kind, _reason(failure) if kind in kinds else "")] += 1
    return [(count, kind, reason) for (kind, reason), count in groups.most_common()]


def failures_line(failures: list[dict[str, Any]], started: int) -> str | None:
    """``Agents failed: <n> of <started> — <count> <kind> (<reason>), ...`` grouped by kind and
    reason, most frequent first (a reason only for kinds whose message explains more than the
    kind); None when no child failed. Bounded to 600 characters."""
    if not failures:
        return None
    parts = [f"{count} {kind}" + (f" ({reason})" if reason else "")
             for count, kind, reason in group_failures(failures)]
    head = f"Agents failed: {len(failures)} of {max(started, len(failures))} — "
    line = head + ", ".join(parts) + "."
    if len(line) > _MAX_LINE_CHARS:
        line = line[: _MAX_LINE_CHARS - 2] + "…."
    return line


def failures_data(failures: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The failures a result's ``data`` lists (the first :data:`MAX_LISTED_FAILURES`)."""
    return failures[:MAX_LISTED_FAILURES]

"""Stored runs rendered for people and scripts: the runs table, one run's agent table, event lines.

Everything here is a pure function of store records (:class:`~dsh_workflow.RunRecord`,
:class:`~dsh_workflow.StoredEvent`): no store access, no clock except for formatting times.
Stored events are ``{"event": <class name>, ...fields}`` without the run identity; their lines
match the live plain progress (``[agent 3 completed] label``, ``[agent 3 replayed] label``, ...).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from dsh_workflow import RunRecord, StoredEvent
from dsh_workflow._prices import UNPRICED, cost_text, format_usd
from dsh_workflow._result import stored_code

from .progress import ended_line, format_elapsed, kind_reason, retried_line, summary_text

__all__ = ["UNSETTLED", "AgentRow", "EventCounts", "EventLines", "agent_rows", "event_counts", "format_time",
           "run_document", "run_summary", "runs_table", "show_text", "stored_reason", "with_counts"]

#: Statuses whose stored totals are not in yet (a run's owner records them when it ends).
UNSETTLED = ("running", "interrupted")


def format_time(seconds: float | None) -> str:
    """A POSIX time as local ``YYYY-MM-DD HH:MM:SS`` (``-`` for None)."""
    if seconds is None:
        return "-"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seconds))


def _duration(record: RunRecord) -> float | None:
    return None if record.ended_at is None else max(0.0, record.ended_at - record.created_at)


def _whole(value: object) -> int:
    """A count from stored event data (which a foreign writer may have filled with anything)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _tokens(usage: Mapping[str, Any] | None) -> int | None:
    if not isinstance(usage, Mapping):
        return None
    return _whole(usage.get("input_tokens")) + _whole(usage.get("output_tokens"))


@dataclass(frozen=True)
class EventCounts:
    """A run's counts as its stored events tell them: children started, children that failed
    (neither completed nor cancelled), calls replayed from a journal, the tokens the children
    reported, and children cancelled."""

    agents: int = 0
    failed: int = 0
    replayed: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cancelled: int = 0


def event_counts(events: Iterable[StoredEvent]) -> EventCounts:
    """Count a run's stored events (see :class:`EventCounts`)."""
    agents = failed = replayed = input_tokens = output_tokens = cancelled = 0
    for stored in events:
        kind = stored.data.get("event")
        if kind == "AgentStarted":
            agents += 1
        elif kind == "AgentReplayed":
            replayed += 1
        elif kind == "AgentEnded":
            outcome = stored.data.get("outcome")
            cancelled += outcome == "cancelled"
            failed += outcome not in ("completed", "cancelled")
            usage = stored.data.get("usage")
            if isinstance(usage, Mapping):
                input_tokens += _whole(usage.get("input_tokens"))
                output_tokens += _whole(usage.get("output_tokens"))
    return EventCounts(agents, failed, replayed, input_tokens, output_tokens, cancelled)


def with_counts(record: RunRecord, counts: EventCounts) -> RunRecord:
    """``record`` with its agents, replayed and usage taken from ``counts`` when its owner has
    not recorded them (a run still running, or interrupted: its totals would read 0), as the
    viewer counts them; a finished run's recorded totals stand."""
    if record.status not in UNSETTLED:
        return record
    from dsh_workflow import Usage

    return record.model_copy(update={
        "agents": counts.agents, "replayed": counts.replayed, "agents_failed": counts.failed,
        "agents_cancelled": counts.cancelled,
        "usage": Usage(input_tokens=max(0, counts.input_tokens),
                       output_tokens=max(0, counts.output_tokens))})


def _child_cost(usage: object) -> float | None:
    value = usage.get("cost_usd") if isinstance(usage, Mapping) else None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) \
        else None


def run_summary(record: RunRecord) -> dict[str, Any]:
    """One run as a ``runs --json`` entry (no script, args or result: see ``show``). A
    ``broken`` run has ``problem``, what is wrong with its stored row; a run that ended without
    completing has its ``error_code``."""
    code = stored_code(record.result) if record.result else None
    return {"id": record.id, "name": record.meta.get("name"), "status": record.status,
            "agents": record.agents, "agents_failed": record.agents_failed,
            "agents_cancelled": record.agents_cancelled,
            "replayed": record.replayed,
            "tokens": record.usage.total_tokens, "cost_usd": record.usage.cost_usd,
            "created_at": record.created_at,
            "ended_at": record.ended_at, "duration_s": _duration(record),
            "resumed_from": record.resumed_from,
            **({"problem": record.problem} if record.problem is not None else {}),
            **({"error_code": code.value} if code is not None else {})}


def _table(header: Sequence[str], rows: Iterable[Sequence[str]],
           right: frozenset[int] = frozenset()) -> str:
    """Columns padded to their widest cell (``right``: indexes aligned right), two spaces apart."""
    cells = [list(header), *([str(cell) for cell in row] for row in rows)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = []
    for row in cells:
        padded = [cell.rjust(widths[i]) if i in right else cell.ljust(widths[i])
                  for i, cell in enumerate(row)]
        lines.append("  ".join(padded).rstrip())
    return "\n".join(lines)


def runs_table(records: Sequence[RunRecord]) -> str:
    """``runs``: id, name, status, agents, replayed, failed, cancelled, tokens, started,
    duration (newest first, as given), with a COST column after the tokens when some listed
    run's cost is known (``unpriced`` for a run whose children's cost is unknown, ``-`` for one
    that spent nothing)."""
    priced = any(record.usage.cost_usd is not None for record in records)
    rows = []
    for record in records:
        duration = _duration(record)
        rows.append([record.id, str(record.meta.get("name", "")), record.status,
                     str(record.agents), str(record.replayed), str(record.agents_failed),
                     str(record.agents_cancelled),
                     f"{record.usage.total_tokens:,}", *([_cost(record)] if priced else []),
                     format_time(record.created_at),
                     "-" if duration is None else format_elapsed(duration)])
    return _table(["ID", "NAME", "STATUS", "AGENTS", "REPLAYED", "FAILED", "CANCELLED",
                   "TOKENS", *(["COST"] if priced else []), "STARTED", "DURATION"], rows,
                  right=frozenset({3, 4, 5, 6, 7, 8} if priced else {3, 4, 5, 6, 7}))


def _cost(record: RunRecord) -> str:
    """A run's cost for a table cell (``unpriced``: no child's cost is known; a ``+`` marks a
    lower bound: some children's cost is unknown; ``-``: nothing was spent)."""
    unpriced = (record.result or {}).get("agents_unpriced")
    return cost_text(record.usage.cost_usd, unpriced if isinstance(unpriced, int) else 0) or "-"


@dataclass
class AgentRow:
    """One ``agent()`` call of a stored run: a started child or a replayed call.

    ``outcome`` is the child's (``completed``, ``failed``, ``cancelled``, ``timeout``),
    ``completed`` for a replayed call, ``running`` for a child of a live run that has not ended,
    ``interrupted`` for one whose run ended without its end (as the viewer calls it: the run's
    process died under it). ``tokens`` is what the child reported (None when nothing was;
    replayed calls cost nothing), ``cost_usd`` its cost in US dollars (None when unknown).
    ``reason`` is why a child did not complete (``kind: message``; None when it completed or
    its run was stored before reasons were).
    """

    seq: int
    label: str
    phase: str | None
    outcome: str
    tokens: int | None
    replayed: bool
    reason: str | None = None
    cost_usd: float | None = None


def agent_rows(events: Iterable[StoredEvent], *, running: bool) -> list[AgentRow]:
    """The run's calls in seq order, from its stored events; ``running``: the run is live."""
    rows: dict[int, AgentRow] = {}
    for stored in events:
        data = stored.data
        kind, seq = data.get("event"), data.get("seq")
        if not isinstance(seq, int):
            continue
        label, phase = str(data.get("label", "")), data.get("phase")
        if kind == "AgentStarted":
            rows[seq] = AgentRow(seq, label, phase, "running" if running else "interrupted",
                                 None, replayed=False)
        elif kind == "AgentEnded":
            row = rows.setdefault(seq, AgentRow(seq, label, phase, "", None, replayed=False))
            row.outcome = str(data.get("outcome", ""))
            row.tokens = _tokens(data.get("usage"))
            row.reason = stored_reason(data)
            row.cost_usd = _child_cost(data.get("usage"))
        elif kind == "AgentReplayed":
            rows[seq] = AgentRow(seq, label, phase, "completed", None, replayed=True)
    return [rows[seq] for seq in sorted(rows)]


def stored_reason(data: Mapping[str, Any]) -> str | None:
    """``kind: reason`` of a stored ``AgentEnded`` whose child did not complete (its first
    validator message, else its message's first line), or None."""
    error = data.get("error")
    if data.get("outcome") == "completed" or not isinstance(error, Mapping):
        return None
    details = error.get("details")
    text = details[0] if isinstance(details, list) and details and isinstance(details[0], str) \
        else str(error.get("message", ""))
    return kind_reason(error.get("kind"), _one_line(text))


def run_document(record: RunRecord, rows: Sequence[AgentRow],
                 pending: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """``show --json``: the whole record (meta, script, args, status, times, counts, usage,
    result), ``agent_calls``, the per-agent table, and — why a parked run waits —
    ``waiting_reason``, ``resume_after`` (from its result) and ``pending``, its questions
    still open in the store (JSON data; empty for a run that does not wait)."""
    document = record.model_dump(mode="json")
    document["agent_calls"] = [asdict(row) for row in rows]
    result = record.result or {}
    waiting = record.status == "waiting"
    document["waiting_reason"] = result.get("waiting_reason") if waiting else None
    document["resume_after"] = result.get("resume_after") if waiting else None
    document["pending"] = [dict(question) for question in pending]
    return document


def show_text(record: RunRecord, rows: Sequence[AgentRow]) -> str:
    """``show``: meta, status, times, result (value or error) and the per-agent table."""
    meta = record.meta
    lines = [f"run:         {record.id}",
             f"name:        {meta.get('name', '')}",
             f"description: {meta.get('description', '')}"]
    if meta.get("whenToUse"):
        lines.append(f"when to use: {meta['whenToUse']}")
    phases = meta.get("phases") or []
    if isinstance(phases, list) and phases:
        lines.append("phases:      " + ", ".join(
            p if isinstance(p, str) else str(p.get("title", "")) for p in phases
            if isinstance(p, Mapping | str)))
    duration = _duration(record)
    lines += [f"status:      {record.status}",
              f"started:     {format_time(record.created_at)}",
              f"ended:       {format_time(record.ended_at)}"
              + ("" if duration is None else f" ({format_elapsed(duration)})"),
              f"agents:      {record.agents} started, {record.agents_failed} failed, "
              + (f"{record.agents_cancelled} cancelled, " if record.agents_cancelled else "")
              + f"{record.replayed} replayed, {record.usage.total_tokens:,} tokens"
              + ("" if record.usage.cost_usd is None else f", {_cost(record)}")]
    if record.resumed_from:
        lines.append(f"resumed from {record.resumed_from}")
    if record.args is not None:
        lines.append("args:        " + json.dumps(record.args, ensure_ascii=False))
    result = record.result
    if result is None:
        lines.append("result:      none yet" if record.status == "running"
                     else "result:      none (the run was interrupted before it ended: the "
                          "process running it died)")
    elif result.get("stop_reason") == "completed":
        lines.append("result:\n" + json.dumps(result.get("value"), indent=2, ensure_ascii=False))
    elif result.get("stop_reason") == "waiting":  # parked: docs/durable-runs.md
        if result.get("waiting_reason") == "limit":
            lines.append("waiting:     for its provider's usage limit to reset"
                         + (f" ({result['resume_after']})" if result.get("resume_after") else ""))
        else:
            asked = [q for q in result.get("pending") or () if isinstance(q, Mapping)]
            lines.append("waiting:     for answers to " + (", ".join(
                f"{q.get('qid')} ({q.get('question')})" for q in asked) or "its questions"))
    else:
        lines.append(f"error:       {result.get('error')}")
        code = stored_code(result)
        if code is not None:
            lines.append(f"error code:  {code.value}")
    lines.append("")
    priced = any(row.cost_usd is not None for row in rows)
    if rows:  # a COST column when some agent's cost is known
        lines.append(_table(
            ["SEQ", "LABEL", "PHASE", "OUTCOME", "TOKENS", *(["COST"] if priced else []),
             "REPLAYED", "REASON"],
            ([str(row.seq), _one_line(row.label), _one_line(row.phase or "-"), row.outcome,
              "-" if row.tokens is None else f"{row.tokens:,}",
              *([] if not priced else [_row_cost(row)]),
              "yes" if row.replayed else "no", row.reason or "-"]
             for row in rows), right=frozenset({0, 4, 5} if priced else {0, 4})))
    else:
        lines.append("no agent() calls")
    return "\n".join(lines)


def _row_cost(row: AgentRow) -> str:
    """An agent's cost for a table cell: dollars, ``unpriced`` when it spent tokens of unknown
    cost, ``-`` when it reported nothing."""
    if row.cost_usd is not None:
        return format_usd(row.cost_usd)
    return UNPRICED if row.tokens else "-"


def _one_line(text: str) -> str:
    first, _, rest = text.partition("\n")
    return first + (" …" if rest else "")


class EventLines:
    """Turns a run's stored events, in order, into the lines of ``logs`` (one line per event,
    like the live plain progress; a multi-line log message keeps its continuation lines
    indented)."""

    def __init__(self, record: RunRecord) -> None:
        self.name = str(record.meta.get("name", ""))
        self.run_id = record.id
        self.began: float | None = None
        self.replayed = 0
        self.unpriced = 0  # ended children that reported tokens without a cost

    def line(self, stored: StoredEvent) -> str:
        data, kind = stored.data, stored.data.get("event")
        if kind == "WorkflowStarted":
            self.began = stored.at
            return f"[start] {self.name} (run {self.run_id})"
        if kind == "PhaseStarted":
            return f"[phase] {data.get('title')}"
        if kind == "LogEmitted":
            return "[log] " + str(data.get("message", "")).replace("\n", "\n      ")
        if kind == "AgentStarted":
            return f"[agent {data.get('seq')} started] {data.get('label')}"
        if kind == "AgentEnded":
            usage = data.get("usage")
            if _tokens(usage) and _child_cost(usage) is None:
                self.unpriced += 1
            return ended_line(data.get("seq"), data.get("outcome"), data.get("label"),
                              stored_reason(data))
        if kind == "AgentRetried":
            return retried_line(data.get("seq"), data.get("delay_s"), data.get("cause"))
        if kind == "AgentReplayed":
            self.replayed += 1
            return f"[agent {data.get('seq')} replayed] {data.get('label')}"
        if kind == "QuestionAsked":
            return f"[{data.get('kind')} {data.get('qid')}] {data.get('question')}"
        if kind == "QuestionAnswered":
            return f"[answered {data.get('qid')}] by {data.get('by')}"
        if kind == "WorkflowEnded":
            elapsed = 0.0 if self.began is None else max(0.0, stored.at - self.began)
            tokens = _tokens(data.get("usage")) or 0
            usage = data.get("usage")
            # as the live final line: a cost once one is known (``+``: a lower bound)
            cost = None if _child_cost(usage) is None else cost_text(
                _child_cost(usage), self.unpriced)
            return "[done] " + summary_text(str(data.get("stop_reason")), elapsed,
                                            _whole(data.get("agents_started")), self.replayed,
                                            f"{tokens:,} tokens" + (f", {cost}" if cost else ""),
                                            _whole(data.get("agents_failed")),
                                            _whole(data.get("agents_cancelled")))
        rest = {key: value for key, value in data.items() if key != "event"}
        return f"[{kind}] {json.dumps(rest, ensure_ascii=False)}"


"""What each ``agent()`` call of a run was asked and what it answered, and the run-control
columns of ``runs`` (the provider a run was started with, a cancel asked for by another
process): the rows, their encoding and the SQL that reads and writes them.

A call's row (table ``calls``, schema version 2) holds its request (the prompt and the options
that decide its answer: agent type and the definition's system prompt, model after aliases,
the model it ran on, route, effort, isolation, schema) next to its answer (text, structured
value, failure, usage, times). The engine writes each row whole (:class:`CallRow`), through
the store's writer in batches, when the call is accepted, when it starts and when it ends; a
later write of the same ``(run_id, seq)`` replaces the earlier one. Reads return
:class:`CallRecord`.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field

from .._subagent import Usage
from .bulk import insert_rows
from .encoding import loads, untext
from .tables import select

__all__ = ["CALL_COLUMNS", "CallBrief", "CallRecord", "CallRow", "cancel_origin",
           "cancel_requested", "insert_calls", "read_briefs", "read_call", "read_calls",
           "read_provider", "request_cancel", "write_provider"]

class CallRow(NamedTuple):
    """One ``calls`` row as the engine writes it: JSON columns already encoded as text."""

    run_id: str
    seq: int
    label: str
    phase: str | None
    request: str | bytes
    started_at: float | None = None
    ended_at: float | None = None
    outcome: str | None = None
    text: str | bytes | None = None
    structured: str | bytes | None = None
    failure: str | bytes | None = None
    usage: str | bytes | None = None
    replayed: int = 0


#: The ``calls`` columns, in the table's order: :class:`CallRow`'s fields.
CALL_COLUMNS = CallRow._fields
_SELECT = select("calls", CALL_COLUMNS[1:])


class CallRecord(BaseModel):
    """One stored ``agent()`` call: what it was asked and what it answered.

    ``seq`` is the call's 1-based seq in its run; ``prompt`` the prompt as sent; ``options``
    the call's other request fields as stored: ``schema``, ``model`` (the call's or its agent
    definition's model, after aliases), ``model_used`` (``model``, else the provider's default
    model when it has one), ``route`` (the script's ``provider`` option), ``effort``,
    ``agent_type``, ``agent`` (the resolved definition: ``name``, ``description``,
    ``system_prompt``, ``model``, ``tools``), ``isolation``, ``max_output_tokens``.
    ``outcome`` is None while the call has not ended (queued or running); ``failure`` the
    reason of a call that did not complete (``{kind, message, details}``); ``text`` and
    ``structured`` what the child answered (also for a failed child, when it answered
    something: an invalid structured value is kept here). ``started_at`` is None for a call
    that never started: ``replayed`` ones (answered from an earlier run's journal) and calls
    stopped while queued.
    """

    model_config = ConfigDict(frozen=True)

    run_id: str
    seq: int = Field(ge=1)
    label: str
    phase: str | None = None
    prompt: str = ""
    options: dict[str, Any] = Field(default_factory=dict)
    started_at: float | None = None
    ended_at: float | None = None
    outcome: str | None = None
    text: str | None = None
    structured: Any = None
    failure: dict[str, Any] | None = None
    usage: Usage | None = None
    replayed: bool = False

    @property
    def model(self) -> str | None:
        """The model the child ran on: the request's (after aliases), else the provider's
        default (None when neither is known)."""
        used = self.options.get("model_used") or self.options.get("model")
        return used if isinstance(used, str) and used else None

    @property
    def requested_model(self) -> str | None:
        """The model the call (or its agent definition) named, after aliases; None: the
        provider's default."""
        return self._option("model")

    @property
    def schema(self) -> dict[str, Any] | None:  # type: ignore[override]  # BaseModel.schema() is deprecated
        """The call's JSON Schema (None for a text call)."""
        value = self.options.get("schema")
        return value if isinstance(value, dict) else None

    @property
    def effort(self) -> str | None:
        return self._option("effort")

    @property
    def agent_type(self) -> str | None:
        return self._option("agent_type")

    @property
    def isolation(self) -> str | None:
        return self._option("isolation")

    @property
    def route(self) -> str | None:
        """The script's ``provider`` option (a route name), if any."""
        return self._option("route")

    @property
    def request(self) -> dict[str, Any]:
        """The whole stored request: ``prompt`` and :attr:`options`."""
        return {"prompt": self.prompt, **self.options}

    def _option(self, key: str) -> str | None:
        value = self.options.get(key)
        return value if isinstance(value, str) else None

    @property
    def system_prompt(self) -> str | None:
        """The agent definition's system prompt (None without an agent type)."""
        agent = self.options.get("agent")
        if isinstance(agent, Mapping):
            prompt = agent.get("system_prompt")
            return prompt if isinstance(prompt, str) else None
        return None


class CallBrief(NamedTuple):
    """What a run's overview needs of a call, without its long texts: the model it ran on, its
    outcome and its failure reason."""

    seq: int
    model: str | None
    outcome: str | None
    failure: dict[str, Any] | None


def _untext(value: str | bytes | None) -> str | None:
    return None if value is None else untext(value)


def _json(value: str | bytes | None) -> Any:
    return None if value is None else loads(value)


def _usage(value: str | bytes | None) -> Usage | None:
    data = _json(value)
    if not isinstance(data, Mapping):
        return None
    known = {key: data[key] for key in Usage.model_fields if key in data}
    return Usage.model_validate(known)


def _record(run_id: str, values: Sequence[Any]) -> CallRecord:
    row = CallRow(run_id, *values)
    options = _json(row.request)
    if not isinstance(options, dict):
        options = {}
    prompt = options.pop("prompt", "")
    failed = _json(row.failure)
    return CallRecord(run_id=run_id, seq=row.seq, label=_untext(row.label) or "",
                      phase=_untext(row.phase), prompt=prompt if isinstance(prompt, str) else "",
                      options=options, started_at=row.started_at, ended_at=row.ended_at,
                      outcome=row.outcome, text=_untext(row.text), structured=_json(row.structured),
                      failure=failed if isinstance(failed, dict) else None,
                      usage=_usage(row.usage), replayed=bool(row.replayed))


def insert_calls(conn: sqlite3.Connection, ticks: Iterable[Iterable[CallRow]]) -> None:
    """Write the rows of several ticks in order (a later row of the same call replaces the
    earlier one)."""
    latest: dict[tuple[str, int], CallRow] = {}
    for tick in ticks:
        for row in tick:
            key = (row.run_id, row.seq)
            latest.pop(key, None)  # keep the order of the latest write
            latest[key] = row
    insert_rows(conn, "calls", CALL_COLUMNS, list(latest.values()), verb="INSERT OR REPLACE")


def read_calls(conn: sqlite3.Connection, run_id: str, *, after: int = 0,
               limit: int | None = None) -> list[CallRecord]:
    """The run's calls with ``seq > after`` in seq order (at most ``limit``)."""
    sql = _SELECT + " WHERE run_id = ? AND seq > ? ORDER BY seq"
    params: tuple[Any, ...] = (run_id, after)
    if limit is not None:
        sql += " LIMIT ?"
        params += (limit,)
    return [_record(run_id, row) for row in conn.execute(sql, params)]


def read_briefs(conn: sqlite3.Connection, run_id: str) -> list[CallBrief]:
    """Every call of the run, briefly (the request's JSON is read by SQLite, not loaded)."""
    rows = conn.execute(
        "SELECT seq, CASE WHEN typeof(request) = 'text' AND json_valid(request) THEN "
        "coalesce(json_extract(request, '$.model_used'), json_extract(request, '$.model')) END, "
        "outcome, failure FROM calls WHERE run_id = ? ORDER BY seq", (run_id,))
    briefs = []
    for seq, model, outcome, failure in rows:
        try:
            failed = _json(failure)
        except ValueError:
            failed = None
        briefs.append(CallBrief(seq, model if isinstance(model, str) and model else None,
                                outcome, failed if isinstance(failed, dict) else None))
    return briefs


def read_call(conn: sqlite3.Connection, run_id: str, seq: int) -> CallRecord | None:
    """One call of the run, or None."""
    row = conn.execute(_SELECT + " WHERE run_id = ? AND seq = ?", (run_id, seq)).fetchone()
    return None if row is None else _record(run_id, row)


def write_provider(conn: sqlite3.Connection, run_id: str, text: str) -> None:
    """Record the run's provider options (JSON text, already free of secrets)."""
    conn.execute("UPDATE runs SET provider = ? WHERE id = ?", (text, run_id))


def read_provider(conn: sqlite3.Connection, run_id: str) -> dict[str, Any] | None:
    """The run's recorded provider options, or None (not recorded, or no such run)."""
    row = conn.execute("SELECT provider FROM runs WHERE id = ?", (run_id,)).fetchone()
    if row is None or row[0] is None:
        return None
    try:
        value = _json(row[0])
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def request_cancel(conn: sqlite3.Connection, run_id: str, at: float,
                   origin: str | None = None) -> bool:
    """Ask the owner of the ``running`` run to cancel it (``origin``: where the request comes
    from; the first request's time and origin stand); False when it is not running."""
    cursor = conn.execute(
        "UPDATE runs SET cancel_origin = CASE WHEN cancel_requested IS NULL THEN ? "
        "ELSE cancel_origin END, cancel_requested = coalesce(cancel_requested, ?) "
        "WHERE id = ? AND status = 'running'", (origin, at, run_id))
    return cursor.rowcount > 0


def cancel_origin(conn: sqlite3.Connection, run_id: str) -> str | None:
    """Where the cancel request of ``run_id`` came from (None: not said, or no request)."""
    row = conn.execute("SELECT cancel_origin FROM runs WHERE id = ?", (run_id,)).fetchone()
    return row[0] if row is not None and isinstance(row[0], str) else None


def cancel_requested(conn: sqlite3.Connection, run_ids: Sequence[str]) -> list[str]:
    """Which of ``run_ids`` (running runs) another process asked to cancel."""
    found: list[str] = []
    for start in range(0, len(run_ids), 500):
        chunk = list(run_ids[start:start + 500])
        marks = ", ".join("?" * len(chunk))
        found += [row[0] for row in conn.execute(
            f"SELECT id FROM runs WHERE id IN ({marks}) AND cancel_requested IS NOT NULL",
            chunk)]
    return found

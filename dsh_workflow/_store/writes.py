"""Writing runs, events and the journal: the rows, and the jobs the writer thread runs.

Events, journal entries and calls made in one loop iteration gather in a :class:`Tick` and go to
the writer (``writer.py``) as one bulk item per kind; the writer hands the rows of consecutive
bulk items to the inserters here (:class:`EventRows`, :func:`insert_journal`, and
``calls.insert_calls``). A run's creation and end are jobs of their own (:func:`insert_run`,
:func:`end_run`).
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from .._loop import LoopHandle
from .bulk import insert_rows
from .calls import CallRow
from .encoding import count as _count
from .encoding import dumps as _dumps
from .encoding import text as _text
from .encoding import text_or_none as _text_or_none
from .encoding import untext as _untext
from .models import JournalEntry, RunRecord, RunStoreError
from .rows import RUN_COLUMNS, record
from .writer import Waiter

__all__ = ["FINAL", "Event", "EventRows", "Tick", "end_run", "events_payload", "insert_journal",
           "insert_run", "journal_rows", "mark_interrupted", "new_run_row"]

Event = Mapping[str, Any] | BaseModel
"""An event as a caller hands it: a JSON object, or a pydantic model dumped by field name."""

EventsPayload = tuple[str, float, list[str | bytes]]
"""One call's events: run id, the time of the call, each event's JSON text."""

FINAL: frozenset[str] = frozenset({"completed", "error", "cancelled", "waiting"})
"""The statuses a run finishes with."""

_EVENT_COLUMNS = ("run_id", "first_seq", "last_seq", "data")
_JOURNAL_COLUMNS = ("run_id", "kind", "seq", "key", "text", "structured", "number",
                    "input_tokens", "output_tokens", "cost_usd", "cache_read_tokens",
                    "cache_write_tokens")


class Tick:
    """Bulk writes made in one loop iteration: they go to the writer as one item per kind, and
    the callers that wait for them share one waiter per kind."""

    __slots__ = ("calls", "events", "events_waiter", "handle", "journal", "journal_waiter")

    def __init__(self, handle: LoopHandle) -> None:
        self.handle = handle
        self.events: list[EventsPayload] = []
        self.journal: list[tuple[Any, ...]] = []
        self.calls: list[CallRow] = []
        self.events_waiter: Waiter | None = None
        self.journal_waiter: Waiter | None = None

    def waiter_for_events(self) -> Waiter:
        if self.events_waiter is None:
            self.events_waiter = Waiter(self.handle)
        return self.events_waiter

    def waiter_for_journal(self) -> Waiter:
        if self.journal_waiter is None:
            self.journal_waiter = Waiter(self.handle)
        return self.journal_waiter


def events_payload(run_id: str, events: Sequence[Event]) -> EventsPayload:
    """``events`` encoded now; raises ``TypeError`` for an event that is not JSON data."""
    for event in events:
        # a plain dict first: the common case, and isinstance against an ABC costs ~1 µs
        if type(event) is not dict and not isinstance(event, Mapping | BaseModel):
            raise TypeError(f"an event is a mapping or a pydantic model, not "
                            f"{type(event).__name__}")
    return run_id, time.time(), [_dumps(event) for event in events]


class EventRows:
    """The ``events`` inserter of one store: it numbers each run's events on from the last
    ``seq`` written (remembered per run on the writer thread; :meth:`forget` drops what a
    rolled-back transaction may have left wrong)."""

    def __init__(self) -> None:
        self._event_seq: dict[str, int] = {}  # writer thread only: last event seq per run

    def insert(self, conn: sqlite3.Connection, ticks: list[list[EventsPayload]]) -> None:
        # One row per run per transaction: a JSON array of [at, event] pairs.
        pairs: dict[str, list[str]] = {}
        for run_id, at, data in (payload for tick in ticks for payload in tick):
            stamp = repr(at)
            pairs.setdefault(run_id, []).extend(
                f"[{stamp},{text if isinstance(text, str) else _untext(text)}]" for text in data)
        rows: list[tuple[str, int, int, str | bytes]] = []
        for run_id, items in pairs.items():
            if not items:
                continue
            last = self._event_seq.get(run_id)
            if last is None:
                last = conn.execute("SELECT coalesce(max(last_seq), 0) FROM events "
                                    "WHERE run_id = ?", (run_id,)).fetchone()[0]
            rows.append((run_id, last + 1, last + len(items), _text("[" + ",".join(items) + "]")))
            self._event_seq[run_id] = last + len(items)
        insert_rows(conn, "events", _EVENT_COLUMNS, rows)

    def forget_run(self, run_id: str) -> None:
        """The run ended: nothing more to number."""
        self._event_seq.pop(run_id, None)

    def forget(self) -> None:
        self._event_seq.clear()


def journal_rows(entries: Sequence[JournalEntry]) -> list[tuple[Any, ...]]:
    """``journal`` rows of ``entries`` (the columns :func:`insert_journal` writes)."""
    return [(e.run_id, e.kind, e.seq, e.key, _text_or_none(e.text),
             None if e.structured is None else _dumps(e.structured), e.number,
             None if e.usage is None else _count(e.usage.input_tokens),
             None if e.usage is None else _count(e.usage.output_tokens),
             None if e.usage is None else e.usage.cost_usd,
             None if e.usage is None or not e.usage.cache_read_tokens
             else _count(e.usage.cache_read_tokens),
             None if e.usage is None or not e.usage.cache_write_tokens
             else _count(e.usage.cache_write_tokens)) for e in entries]


def insert_journal(conn: sqlite3.Connection, ticks: list[list[tuple[Any, ...]]]) -> None:
    insert_rows(conn, "journal", _JOURNAL_COLUMNS,
                ticks[0] if len(ticks) == 1 else [row for tick in ticks for row in tick])


def new_run_row(record: RunRecord, args: Any, owner: str) -> tuple[Any, ...]:
    """The values :func:`insert_run` writes for a new run (its ``args`` as given) owned by
    ``owner`` (a lock token)."""
    return (record.id, _dumps(record.meta), _text(record.script),
            None if args is None else _dumps(args), record.created_at,
            record.resumed_from, owner, record.owner_pid, record.owner_host)


def insert_run(conn: sqlite3.Connection, path: str, row: tuple[Any, ...]) -> None:
    """Insert a :func:`new_run_row`; raises :class:`RunStoreError` when its id is taken or the
    run it resumes is not in the store."""
    run_id, resumed_from = row[0], row[5]
    if conn.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone():
        raise RunStoreError(path, f"a run with id {run_id!r} already exists")
    if resumed_from is not None and not conn.execute(
            "SELECT 1 FROM runs WHERE id = ?", (resumed_from,)).fetchone():
        raise RunStoreError(path, f"resumed_from {resumed_from!r}: no such run")
    conn.execute("INSERT INTO runs (id, meta, script, args, created_at, status, "
                 "resumed_from, owner, owner_pid, owner_host) "
                 "VALUES (?, ?, ?, ?, ?, 'running', ?, ?, ?, ?)", row)


def end_run(conn: sqlite3.Connection, path: str, run_id: str,
            values: tuple[Any, ...]) -> RunRecord:
    """End the ``running`` run with ``values`` (status, result, ended_at, agents, replayed,
    input and output tokens, agents_failed, cost, then the run id); returns its record.
    Raises :class:`RunStoreError` when the run is unknown or no longer running."""
    cursor = conn.execute("UPDATE runs SET status = ?, result = ?, ended_at = ?, "
                          "agents = ?, replayed = ?, input_tokens = ?, output_tokens = ?, "
                          "agents_failed = ?, cost_usd = ? "
                          "WHERE id = ? AND status = 'running'", values)
    row = conn.execute(f"SELECT {RUN_COLUMNS} FROM runs WHERE id = ?", (run_id,)).fetchone()
    if row is None:
        raise RunStoreError(path, f"no such run: {run_id!r}")
    if cursor.rowcount == 0:
        raise RunStoreError(path, f"run {run_id!r} is not running (it is {row[6]})")
    return record(row)


def mark_interrupted(conn: sqlite3.Connection, owner: str, now: float) -> None:
    """Mark the ``running`` runs of the dead ``owner`` ``interrupted`` at ``now``."""
    conn.execute("UPDATE runs SET status = 'interrupted', ended_at = ? "
                 "WHERE owner = ? AND status = 'running'", (now, owner))

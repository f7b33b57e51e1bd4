"""Stored rows read back as records: a ``runs`` row as a :class:`RunRecord` (a row that cannot be
read whole as a ``broken`` one), an ``events`` row as its events, a ``journal`` row as a
:class:`JournalEntry`. A value that cannot be read raises :class:`BadRow` saying which and why
(the readers turn it into a :class:`RunStoreError` naming the run)."""

from __future__ import annotations

import math
from typing import Any

from pydantic import ValidationError

from .._result import with_error_code
from .._subagent import Usage
from .encoding import loads as _loads
from .encoding import untext as _untext
from .models import JournalEntry, RunRecord
from .tables import JournalRow, RunRecordRow, names, select

__all__ = ["JOURNAL_SELECT", "RUN_COLUMNS", "BadRow", "event_pairs", "invalid", "journal_entry",
           "record", "short"]

RUN_COLUMNS = names(RunRecordRow._fields)
"""The ``runs`` columns :func:`record` reads (:class:`~.tables.RunRecordRow`'s)."""

JOURNAL_SELECT = select("journal", JournalRow._fields[1:])
"""The ``journal`` columns :func:`journal_entry` reads (:class:`~.tables.JournalRow`'s but the
run id)."""


class BadRow(Exception):
    """A stored value that cannot be read; ``str()`` says which and why."""


def record(values: tuple[Any, ...]) -> RunRecord:
    """The record of a ``runs`` row (its :data:`RUN_COLUMNS`); a row that cannot be read whole
    gives a ``broken`` record naming what is wrong (never an exception: one bad row must not
    hide the others)."""
    row = RunRecordRow._make(values)
    try:
        return _whole_record(row)
    except BadRow as exc:
        problem = str(exc)
    except ValidationError as exc:
        problem = invalid(exc)
    except Exception as exc:  # noqa: BLE001 - whatever a foreign row holds, it is reported
        problem = f"it cannot be read ({type(exc).__name__}: {short(exc)})"
    return _broken_record(row, problem)


def event_pairs(first_seq: Any, data: Any) -> list[tuple[int, float, dict[str, Any]]]:
    """``(seq, at, event)`` of one ``events`` row (a JSON array of ``[at, event]`` pairs)."""
    if type(first_seq) is not int:
        raise BadRow(f"an events row starts at {first_seq!r}, not at a whole number")
    loaded = _column_json(f"events from seq {first_seq}", data)
    if not isinstance(loaded, list):
        raise BadRow(f"its events from seq {first_seq} are not a JSON array")
    pairs = []
    for seq, pair in enumerate(loaded, first_seq):
        if not (isinstance(pair, list) and len(pair) == 2
                and isinstance(pair[0], int | float) and not isinstance(pair[0], bool)
                and isinstance(pair[1], dict)):
            raise BadRow(f"its event {seq} is not a [time, object] pair")
        pairs.append((seq, float(pair[0]), pair[1]))
    return pairs


def journal_entry(run_id: str, values: tuple[Any, ...]) -> JournalEntry:
    """The entry of a ``journal`` row (its :data:`JOURNAL_SELECT` columns)."""
    row = JournalRow(run_id, *values)
    kind, seq = row.kind, row.seq
    try:
        return JournalEntry(
            run_id=run_id, kind=kind, seq=seq, key=row.key,
            text=None if row.text is None
            else _column_text(f"journal entry {seq} text", row.text),
            structured=None if row.structured is None
            else _column_json(f"journal entry {kind} {seq}", row.structured),
            number=row.number,
            usage=None if row.input_tokens is None else Usage(
                input_tokens=row.input_tokens, output_tokens=row.output_tokens or 0,
                cost_usd=row.cost_usd, cache_read_tokens=row.cache_read_tokens or 0,
                cache_write_tokens=row.cache_write_tokens or 0))
    except ValidationError as exc:
        raise BadRow(f"journal entry {kind} {seq}: {invalid(exc)}") from None


def short(exc: BaseException, limit: int = 160) -> str:
    """An exception's text in at most ``limit`` characters (for a reason in one line)."""
    text = str(exc) or type(exc).__name__
    return text if len(text) <= limit else text[:limit] + "…"


def invalid(exc: ValidationError) -> str:
    """A pydantic error of a stored row in a line: the first field that is wrong, and how."""
    first = exc.errors(include_url=False)[0]
    where = ".".join(str(part) for part in first.get("loc", ())) or "row"
    got = repr(first.get("input"))
    got = got if len(got) <= 60 else got[:60] + "…"
    more = exc.error_count() - 1
    return (f"its {where} is invalid: {first.get('msg', 'wrong value')} (got {got})"
            + (f"; and {more} more" if more > 0 else ""))


def _stored_result(data: Any) -> Any:
    """A stored result as loaded: a row written before results carried ``error_code`` gets
    the code derived from its text (:func:`~dsh_workflow._result.with_error_code`)."""
    return with_error_code(data) if isinstance(data, dict) else data


def _column_json(column: str, value: Any) -> Any:
    """The JSON value stored in ``column`` (text, or the bytes of a lone-surrogate text)."""
    if not isinstance(value, str | bytes):
        raise BadRow(f"its {column} is not JSON text (it holds {type(value).__name__})")
    try:
        return _loads(value)
    except (ValueError, RecursionError) as exc:
        raise BadRow(f"its {column} is not valid JSON ({short(exc)})") from None


def _column_text(column: str, value: Any) -> str:
    if not isinstance(value, str | bytes):
        raise BadRow(f"its {column} is not text (it holds {type(value).__name__})")
    try:
        return _untext(value)
    except ValueError as exc:
        raise BadRow(f"its {column} is not UTF-8 text ({short(exc)})") from None


def _whole_record(row: RunRecordRow) -> RunRecord:
    meta, result, args = row.meta, row.result, row.args
    meta = _column_json("meta", meta)
    if not isinstance(meta, dict):
        raise BadRow(f"its meta is not a JSON object (it is {type(meta).__name__})")
    loaded = None if result is None else _column_json("result", result)
    if loaded is not None and not isinstance(loaded, dict):
        raise BadRow(f"its result is not a JSON object (it is {type(loaded).__name__})")
    return RunRecord(id=row.id, meta=meta, script=_column_text("script", row.script),
                     args=None if args is None else _column_json("args", args),
                     created_at=row.created_at, ended_at=row.ended_at, status=row.status,
                     result=None if loaded is None else _stored_result(loaded),
                     resumed_from=row.resumed_from, owner_pid=row.owner_pid,
                     owner_host=row.owner_host, agents=row.agents, replayed=row.replayed,
                     usage=Usage(input_tokens=row.input_tokens, output_tokens=row.output_tokens,
                                 cost_usd=row.cost_usd),
                     agents_failed=row.agents_failed,
                     agents_cancelled=_stored_count(loaded, "agents_cancelled"))


def _stored_count(result: dict[str, Any] | None, key: str) -> int:
    """A count kept in a stored result (0 when absent or not a whole number >= 0)."""
    value = None if result is None else result.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _broken_record(row: RunRecordRow, problem: str) -> RunRecord:
    """A ``broken`` record of ``row``: its id and what else reads cleanly (for the listing)."""
    run_id, meta, created_at, ended_at = row.id, row.meta, row.created_at, row.ended_at
    if isinstance(run_id, bytes):
        run_id = run_id.decode("utf-8", "replace")
    run_id = str(run_id) if run_id is not None and str(run_id) else "(no id)"
    try:
        shown = _column_json("meta", meta)
    except BadRow:
        shown = None
    name = shown.get("name") if isinstance(shown, dict) else None

    def when(value: Any) -> float | None:
        ok = isinstance(value, int | float) and not isinstance(value, bool) \
            and math.isfinite(value)
        return float(value) if ok else None

    return RunRecord(id=run_id, meta={"name": name} if isinstance(name, str) else {},
                     script="", created_at=when(created_at) or 0.0, ended_at=when(ended_at),
                     status="broken", problem=problem)

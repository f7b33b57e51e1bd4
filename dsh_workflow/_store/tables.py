"""The store's columns, declared once: each row the code writes or reads, as a named tuple whose
fields are the columns in the table's order.

``migrations.py`` is the history that made the tables (its steps never change); these are the
rows the code writes and reads now, and every statement that names columns derives them from
here: the inserts (``bulk.insert_rows`` with a row type's fields), the selects
(:func:`select`) and the readers, which take a row apart by field name, never by position.
``calls.CallRow`` is the ``calls`` table's declaration, in the same way.
``tests/durable/test_store_tables.py`` checks the declarations against a file the migrations
made: the same columns, in the same order.
"""

from __future__ import annotations

from typing import Any, NamedTuple

__all__ = ["EventRow", "JournalRow", "NewRun", "RunEnd", "RunRecordRow", "names", "select"]


class RunRecordRow(NamedTuple):
    """The ``runs`` columns a :class:`~dsh_workflow._store.RunRecord` is read from (all but
    ``n``, the provider and the cancel request), in the table's order."""

    id: Any
    meta: Any
    script: Any
    args: Any
    created_at: Any
    ended_at: Any
    status: Any
    result: Any
    resumed_from: Any
    owner: Any
    owner_pid: Any
    owner_host: Any
    agents: Any
    replayed: Any
    input_tokens: Any
    output_tokens: Any
    agents_failed: Any
    cost_usd: Any


class NewRun(NamedTuple):
    """The ``runs`` columns written when a run starts (its ``status`` is ``running``)."""

    id: str
    meta: str | bytes
    script: str | bytes
    args: str | bytes | None
    created_at: float
    resumed_from: str | None
    owner: str
    owner_pid: int | None
    owner_host: str | None


class RunEnd(NamedTuple):
    """The ``runs`` columns written when a run ends."""

    ended_at: float
    status: str
    result: str | bytes | None
    agents: int
    replayed: int
    input_tokens: int
    output_tokens: int
    agents_failed: int
    cost_usd: float | None


class EventRow(NamedTuple):
    """One ``events`` row: a run's events ``first_seq..last_seq`` as one JSON array."""

    run_id: str
    first_seq: int
    last_seq: int
    data: str | bytes


class JournalRow(NamedTuple):
    """One ``journal`` row: a journaled value of a run (JSON columns already encoded)."""

    run_id: Any
    kind: Any
    seq: Any
    key: Any
    text: Any
    structured: Any
    number: Any
    input_tokens: Any
    output_tokens: Any
    cost_usd: Any
    cache_read_tokens: Any
    cache_write_tokens: Any


def names(fields: tuple[str, ...]) -> str:
    """Columns as a statement lists them: ``a, b, c``."""
    return ", ".join(fields)


def select(table: str, fields: tuple[str, ...]) -> str:
    """``SELECT <fields> FROM <table>`` (the caller adds its ``WHERE``)."""
    return f"SELECT {names(fields)} FROM {table}"

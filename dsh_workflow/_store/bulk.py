"""Inserting many rows with few statements.

The stdlib ``sqlite3`` module releases the GIL around every statement step, so ``executemany``
gives up and re-takes the GIL once per row; while the event loop is busy, each re-take can wait
for the interpreter's switch interval. One multi-row ``INSERT … VALUES (…), (…), …`` is one step.
Rows go in chunks whose sizes are powers of two, so only a handful of distinct statements is
ever prepared (and the connection's statement cache keeps them).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from functools import lru_cache
from typing import Any

__all__ = ["insert_rows"]

_MAX_CHUNK = 512


@lru_cache(maxsize=256)
def _statement(table: str, columns: tuple[str, ...], count: int, verb: str = "INSERT") -> str:
    row = "(" + ", ".join("?" * len(columns)) + ")"
    return f"{verb} INTO {table} ({', '.join(columns)}) VALUES " + ", ".join([row] * count)


def _chunk_limit(conn: sqlite3.Connection, width: int) -> int:
    try:
        variables = conn.getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
    except AttributeError:  # pragma: no cover - Python < 3.11 has no getlimit
        variables = 999
    limit = 1
    while limit * 2 <= min(_MAX_CHUNK, variables // width):
        limit *= 2
    return limit


def insert_rows(conn: sqlite3.Connection, table: str, columns: tuple[str, ...],
                rows: Sequence[Sequence[Any]], *, verb: str = "INSERT") -> None:
    """Insert ``rows`` (each ``len(columns)`` values) into ``table`` in their order
    (``verb``: ``INSERT``, or ``INSERT OR REPLACE`` to replace rows with the same key)."""
    width = len(columns)
    limit = _chunk_limit(conn, width)
    start, total = 0, len(rows)
    while start < total:
        count = limit
        while count > total - start:
            count //= 2
        chunk = rows[start:start + count]
        conn.execute(_statement(table, columns, count, verb), [value for row in chunk for value in row])
        start += count

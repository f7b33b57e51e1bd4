"""The store's columns are declared once (SPEC §28): ``_store/tables.py`` (and ``calls.CallRow``)
say each table's columns in its order, and a file the migrations made has exactly them."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from dsh_workflow._store import migrations
from dsh_workflow._store.calls import CALL_COLUMNS, CallRow
from dsh_workflow._store.rows import JOURNAL_SELECT, RUN_COLUMNS
from dsh_workflow._store.tables import EventRow, JournalRow, NewRun, RunEnd, RunRecordRow


@pytest.fixture
def columns(tmp_path: Path) -> dict[str, tuple[str, ...]]:
    """Each table of a fresh file the migrations made: its columns, in order."""
    path = tmp_path / "fresh.sqlite3"
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        migrations.migrate(conn, str(path))
        return {table: tuple(row[1] for row in conn.execute(f"PRAGMA table_info({table})"))
                for table in ("runs", "events", "journal", "calls")}
    finally:
        conn.close()


def test_the_whole_rows_are_the_tables(columns: dict[str, tuple[str, ...]]) -> None:
    assert EventRow._fields == columns["events"]
    assert JournalRow._fields == columns["journal"]
    assert CallRow._fields == CALL_COLUMNS == columns["calls"]


def test_the_runs_rows_are_its_columns_in_its_order(columns: dict[str, tuple[str, ...]]) -> None:
    runs = columns["runs"]
    for row in (RunRecordRow, NewRun, RunEnd):
        assert set(row._fields) <= set(runs), row.__name__
        assert sorted(row._fields, key=runs.index) == list(row._fields), row.__name__
    # what a record is read from: every column but the insertion order, the provider and the
    # cancel request (read by their own queries)
    assert set(runs) - set(RunRecordRow._fields) == {"n", "provider", "cancel_requested",
                                               "cancel_origin"}


def test_the_statements_name_the_declared_columns() -> None:
    assert ", ".join(RunRecordRow._fields) == RUN_COLUMNS
    assert f"SELECT {', '.join(JournalRow._fields[1:])} FROM journal" == JOURNAL_SELECT

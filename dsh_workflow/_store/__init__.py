"""Durable runs: the run-store seam and its embedded SQLite implementation (SPEC §9)."""

from .models import JournalEntry, JournalKind, RunRecord, RunStatus, RunStoreError, StoredEvent
from .protocol import RunStore
from .schema import SCHEMA_VERSION, migrate
from .sqlite import SQLiteRunStore

__all__ = ["SCHEMA_VERSION", "JournalEntry", "JournalKind", "RunRecord", "RunStatus", "RunStore",
           "RunStoreError", "SQLiteRunStore", "StoredEvent", "migrate"]

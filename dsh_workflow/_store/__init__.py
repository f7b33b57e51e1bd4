"""Durable runs: the run-store seam and its embedded SQLite implementation (docs/durable-runs.md).

Layout: ``models`` (what crosses the boundary), ``protocol`` (:class:`RunStore`, the seam),
``sqlite`` (:class:`SQLiteRunStore`, the facade composing the rest), ``connection`` (opening the
file, its identity, storage failures as errors), ``migrations`` (the tables, the schema version
and its steps), ``writer`` (the one writer thread per store, group commit and the watchdog),
``writes`` (the rows and jobs that write runs, events and the journal), ``bulk`` (multi-row
inserts), ``reads`` (the read connections and the queries of runs, events and journal),
``rows`` (stored rows read back as records), ``encoding`` (values as SQLite holds them),
``calls`` (each ``agent()`` call's record and the run-control columns), ``questions`` (the
questions runs ask and their answers), ``liveness`` (a
``running`` run whose owner died reads ``interrupted``), ``owners`` (who owns a running run and
whether it is alive), ``files`` (owner-only file modes), ``signing`` (a provider record signed
with the user's key, so a resume trusts only what this user recorded).

What a store file holds: per run its id, meta, script, args, times, status, final result, the
pid and host of the process that ran it, counts and token usage; every event the host gave it;
and the journal (each completed child's key, text, structured value and usage, and the
``Date.now()`` / ``Math.random()`` values a script got); per ``agent()`` call, what it was asked
and answered (``calls``); per run, the provider options it was started with and a cancel asked
for by another process. Scripts, prompts' answers and args are
stored in clear: the file is as sensitive as the workflows run against it.
"""

from .calls import CallBrief, CallRecord, CallRow
from .migrations import SCHEMA_VERSION, migrate
from .models import JournalEntry, JournalKind, RunRecord, RunStatus, RunStoreError, StoredEvent
from .protocol import QuestionStore, RunControlStore, RunStore
from .questions import QuestionRecord
from .sqlite import SQLiteRunStore

__all__ = ["SCHEMA_VERSION", "CallBrief", "CallRecord", "CallRow", "JournalEntry", "JournalKind",
           "QuestionRecord", "QuestionStore", "RunControlStore", "RunRecord", "RunStatus", "RunStore", "RunStoreError",
           "SQLiteRunStore", "StoredEvent", "migrate"]

"""A run store with broken rows, for the tests that check a broken row is an error, not a crash:
good runs, runs whose ``runs`` row is corrupted in one way each, one run whose events and one
whose journal are corrupted. Written with the store, then damaged with ``sqlite3`` directly."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from dsh_workflow import JournalEntry, SQLiteRunStore, Usage

__all__ = ["BROKEN_EVENTS", "BROKEN_JOURNAL", "CORRUPTIONS", "GOOD", "SCRIPT", "make_store"]

#: What each broken run has wrong: (table, the SQL that damages it).
CORRUPTIONS: dict[str, tuple[str, str]] = {
    "bad-meta": ("runs", "UPDATE runs SET meta = '{not json' WHERE id = ?"),
    "meta-not-object": ("runs", "UPDATE runs SET meta = '[1, 2]' WHERE id = ?"),
    "bad-result": ("runs", "UPDATE runs SET result = '{\"value\": ' WHERE id = ?"),
    "bad-args": ("runs", "UPDATE runs SET args = 'nope' WHERE id = ?"),
    "bad-status": ("runs", "UPDATE runs SET status = 'paused' WHERE id = ?"),
    "bad-created": ("runs", "UPDATE runs SET created_at = 'yesterday' WHERE id = ?"),
    "bad-counts": ("runs", "UPDATE runs SET agents = -5, input_tokens = 'many' WHERE id = ?"),
    "blob-script": ("runs", "UPDATE runs SET script = x'ff00fe' WHERE id = ?"),
}
BROKEN_EVENTS = "broken-events"
BROKEN_JOURNAL = "broken-journal"
GOOD = ("good-1", "good-2")
SCRIPT = "return await agent('hello')"


async def make_store(path: Path) -> None:
    """Good finished runs, runs whose rows are then corrupted, one run whose events and one
    whose journal are corrupted (their run rows are fine)."""
    async with SQLiteRunStore(path) as store:
        for index, run_id in enumerate([*GOOD, *CORRUPTIONS, BROKEN_EVENTS, BROKEN_JOURNAL]):
            await store.create_run(run_id, meta={"name": f"name of {run_id}",
                                                       "description": "a run"}, script=SCRIPT,
                                   args={"n": index}, created_at=1000.0 + index)
            await store.append_events(run_id, [{"event": "WorkflowStarted"},
                                               {"event": "LogEmitted", "message": "hi"}])
            await store.commit_journal([JournalEntry(run_id=run_id, seq=1, key="k1",
                                                     text="hello back")])
            await store.finish_run(run_id, status="completed",
                                   result={"stop_reason": "completed", "value": index},
                                   agents=1, usage=Usage(input_tokens=1, output_tokens=2))
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA ignore_check_constraints = ON")
        for run_id, (_, sql) in CORRUPTIONS.items():
            conn.execute(sql, (run_id,))
        conn.execute("UPDATE events SET data = '[[1.0, {\"event\": ' WHERE run_id = ?",
                     (BROKEN_EVENTS,))
        conn.execute("UPDATE journal SET structured = '{oops', text = NULL WHERE run_id = ?",
                     (BROKEN_JOURNAL,))

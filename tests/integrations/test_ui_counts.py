"""The viewer's run list counts unfinished runs incrementally, a bounded number of events per
request (:mod:`dsh_workflow._ui.counts`), on a real SQLite run store. Kept apart from
``test_ui.py``, whose browser runs an asyncio loop of its own in the test thread."""

from __future__ import annotations

import pathlib

import pytest

pytest.importorskip("starlette")

from dsh_workflow import SQLiteRunStore
from dsh_workflow._store import StoredEvent
from dsh_workflow._tally import count_stored
from dsh_workflow._ui.counts import SoFar


@pytest.mark.anyio
async def test_counts_so_far_are_read_incrementally_and_bounded(tmp_path: pathlib.Path) -> None:
    path = str(tmp_path / "many.sqlite3")
    async with SQLiteRunStore(path) as store:
        for number in range(12):
            await store.create_run(f"r{number}", meta={"name": "n"}, script="")
            await store.append_events(f"r{number}", [
                {"event": "AgentStarted", "seq": s, "label": "a"} for s in range(1, 1001)])
        await store.create_run("done", meta={"name": "n"}, script="")
        await store.finish_run("done", status="completed", result={"value": 1})

        read: list[int] = []

        class Counting:
            async def events(self, run_id: str, *, after: int = 0,
                             limit: int | None = None) -> list[StoredEvent]:
                found = await store.events(run_id, after=after, limit=limit)
                read.append(len(found))
                return found

        records = await store.list_runs()
        # Counting stands in for the store: events() is all SoFar reads of it
        counter = SoFar(Counting(), budget=5_000, page=2_000)  # type: ignore[arg-type]
        first = await counter.counts(records)
        assert sum(read) == 5_000  # bounded: the rest waits for the next refresh
        assert "done" not in first
        for _ in range(2):
            read.clear()
            await counter.counts(records)
            assert sum(read) <= 5_000
        read.clear()
        caught_up = await counter.counts(records)
        assert sum(read) == 0  # nothing new: nothing recounted
        assert len(read) == 12  # one empty read per unfinished run
        assert {c.agents for c in caught_up.values()} == {1000}
        await store.append_events("r3", [{"event": "AgentStarted", "seq": 1001, "label": "b"}])
        read.clear()
        grown = await counter.counts(records)
        assert sum(read) == 1 and grown["r3"].agents == 1001
        assert grown["r3"] == count_stored(await store.events("r3"))

"""The run store (docs/durable-runs.md) on a real SQLite file, with real child processes."""

from __future__ import annotations

import functools
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest
from _support import await_until, settled_run
from anyio.abc import Process
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_workflow import JournalEntry, RunRecord, RunStore, RunStoreError, SQLiteRunStore, Usage
from dsh_workflow._store import SCHEMA_VERSION, migrate
from dsh_workflow._store.connection import connect
from dsh_workflow._store.migrations import APPLICATION_ID, MIGRATIONS

CHILD = str(Path(__file__).with_name("_store_child.py"))
META = {"name": "demo", "description": "a demo run"}

pytestmark = pytest.mark.anyio


def entry(run_id: str, seq: int, **fields: Any) -> JournalEntry:
    return JournalEntry(run_id=run_id, seq=seq, key=fields.pop("key", f"key-{seq}"), **fields)


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "runs.sqlite3")


# ---- records, events, journal ----------------------------------------------------------------

async def test_create_and_read_a_run(db: str) -> None:
    async with SQLiteRunStore(db) as store:
        assert isinstance(store, RunStore)
        created = await store.create_run("r1", meta=META, script="return 1", args={"n": [1, 2]})
        assert created.status == "running" and created.ended_at is None
        assert created.owner_pid == os.getpid() and created.owner_host
        got = await store.get_run("r1")
        assert got == created
        assert store.get_run_sync("r1") == created
        assert await store.get_run("nope") is None
    async with SQLiteRunStore(db) as again:  # the record outlives the store that wrote it
        got = await again.get_run("r1")
        assert got is not None
        assert (got.meta, got.script, got.args) == (META, "return 1", {"n": [1, 2]})


async def test_run_ids_are_unique_and_resumed_from_must_exist(db: str) -> None:
    async with SQLiteRunStore(db) as store:
        await store.create_run("r1", meta=META, script="s")
        with pytest.raises(RunStoreError, match="already exists"):
            await store.create_run("r1", meta=META, script="s")
        with pytest.raises(RunStoreError, match="no such run"):
            await store.create_run("r2", meta=META, script="s", resumed_from="ghost")
        resumed = await store.create_run("r3", meta=META, script="s", resumed_from="r1")
        assert resumed.resumed_from == "r1"
        assert (await store.get_run("r3")).resumed_from == "r1"  # type: ignore[union-attr]  # None fails the test anyway


async def test_events_keep_their_order_across_posts_appends_and_reopen(db: str) -> None:
    async with SQLiteRunStore(db) as store:
        await store.create_run("r", meta=META, script="s")
        for n in range(1, 51):
            store.post_events("r", [{"n": n}])
            store.post_events("r", [])  # nothing to add: no seq taken
        await store.append_events("r", [{"n": 51}, {"n": 52}])
        events = await store.events("r")
        assert [e.seq for e in events] == list(range(1, 53))
        assert [e.data["n"] for e in events] == list(range(1, 53))
        assert [e.data["n"] for e in await store.events("r", after=50)] == [51, 52]
        assert [e.seq for e in await store.events("r", after=10, limit=3)] == [11, 12, 13]
        await store.append_events("r", [])
    async with SQLiteRunStore(db) as store:  # a new store continues the numbering
        await store.append_events("r", [{"n": 53}])
        assert [e.seq for e in await store.events("r", after=51)] == [52, 53]


async def test_flush_commits_posted_events_and_reports_their_failure(db: str) -> None:
    async with SQLiteRunStore(db) as store:
        await store.create_run("r", meta=META, script="s")
        store.post_events("r", [{"a": 1}])
        await store.flush()
        assert len(await store.events("r")) == 1
        store.post_events("ghost", [{"a": 1}])  # no such run: fails on the writer
        with pytest.raises(RunStoreError, match="no such run"):
            await store.flush()
        await store.flush()  # reported once
        with pytest.raises(TypeError):
            store.post_events("r", [{"a": object()}])  # not JSON: refused at once


async def test_writes_apply_in_call_order(db: str) -> None:
    async with SQLiteRunStore(db) as store:
        await store.create_run("r", meta=META, script="s")
        store.post_events("r", [{"last": False}])
        finished = await store.finish_run("r", status="completed", result={"value": 1})
        assert finished.status == "completed"
        # the event posted before finish_run was committed before it returned
        assert [e.data for e in await store.events("r")] == [{"last": False}]


async def test_journal_round_trip_in_seq_order(db: str) -> None:
    async with SQLiteRunStore(db) as store:
        await store.create_run("r", meta=META, script="s")
        entries = [
            entry("r", 3, text="three", usage=Usage(input_tokens=5, output_tokens=7)),
            entry("r", 1, text=None, structured={"ok": True, "list": [1, "x"]}),
            entry("r", 2, text="two"),
            JournalEntry(run_id="r", seq=1, kind="clock", number=1735689600123.0),
            JournalEntry(run_id="r", seq=1, kind="random", number=0.25),
            JournalEntry(run_id="r", seq=2, kind="random", number=0.5),
        ]
        await store.commit_journal(entries[:3])
        store.post_journal(entries[3:])
        await store.flush()
        agents = await store.journal("r", kind="agent")
        assert agents == sorted(entries[:3], key=lambda e: e.seq)
        assert [e.number for e in await store.journal("r", kind="random")] == [0.25, 0.5]
        everything = await store.journal("r")
        assert [(e.seq, e.kind) for e in everything] == [
            (1, "agent"), (1, "clock"), (1, "random"), (2, "agent"), (2, "random"), (3, "agent")]
        assert everything[5].usage == Usage(input_tokens=5, output_tokens=7)
        assert everything[0].usage is None


async def test_journal_refuses_duplicates_and_unknown_runs(db: str) -> None:
    async with SQLiteRunStore(db) as store:
        await store.create_run("r", meta=META, script="s")
        await store.commit_journal([entry("r", 1)])
        with pytest.raises(RunStoreError, match="UNIQUE"):
            await store.commit_journal([entry("r", 1)])
        with pytest.raises(RunStoreError, match="no such run"):
            await store.commit_journal([entry("ghost", 1)])
        await store.commit_journal([entry("r", 2)])  # the store goes on
        assert [e.seq for e in await store.journal("r")] == [1, 2]


def test_journal_entry_shape_follows_its_kind() -> None:
    with pytest.raises(ValueError, match="key"):
        JournalEntry(run_id="r", seq=1)
    with pytest.raises(ValueError, match="number"):
        JournalEntry(run_id="r", seq=1, kind="clock")
    with pytest.raises(ValueError, match="only a number"):
        JournalEntry(run_id="r", seq=1, kind="random", number=0.5, text="x")
    with pytest.raises(ValueError):
        JournalEntry(run_id="r", seq=0, key="k")


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text()
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(text=st.none() | st.text(), structured=st.none() | st.dictionaries(st.text(), JSON),
       args=JSON, event=st.dictionaries(st.text(), JSON))
def test_any_json_and_any_text_round_trip(tmp_path: Path, text: str | None,
                                          structured: dict[str, Any] | None, args: Any,
                                          event: dict[str, Any]) -> None:
    # st.text() includes lone surrogates, which JSON from a script may carry
    async def main() -> None:
        path = tmp_path / f"{uuid.uuid4().hex}.sqlite3"
        async with SQLiteRunStore(path) as store:
            await store.create_run("r", meta={"name": text or "x"}, script=text or "", args=args)
            await store.append_events("r", [event])
            await store.commit_journal([entry("r", 1, text=text, structured=structured)])
            run = await store.get_run("r")
            assert run is not None and run.args == args and run.script == (text or "")
            assert (await store.events("r"))[0].data == event
            got = (await store.journal("r"))[0]
            assert (got.text, got.structured) == (text, structured)

    anyio.run(main)


# ---- group commit --------------------------------------------------------------------------

async def test_concurrent_commits_share_transactions(db: str) -> None:
    async with SQLiteRunStore(db) as store:
        await store.create_run("r", meta=META, script="s")
        before = store.transactions
        async with anyio.create_task_group() as tg:
            for seq in range(1, 1001):
                tg.start_soon(store.commit_journal, [entry("r", seq)])
        assert len(await store.journal("r")) == 1000
        used = store.transactions - before
        assert 1 <= used <= 20, used  # a thousand commits, a handful of transactions


async def test_commit_returns_only_after_its_entry_is_visible_to_another_connection(
        db: str) -> None:
    async with SQLiteRunStore(db) as store:
        await store.create_run("r", meta=META, script="s")
        probe = sqlite3.connect(db)
        try:
            async def commit_and_check(seq: int) -> None:
                await store.commit_journal([entry("r", seq)])
                row = probe.execute("SELECT seq FROM journal WHERE run_id = 'r' AND seq = ?",
                                    (seq,)).fetchone()
                assert row == (seq,)

            async with anyio.create_task_group() as tg:
                for seq in range(1, 101):
                    tg.start_soon(commit_and_check, seq)
        finally:
            probe.close()


async def test_a_cancelled_waiter_does_not_disturb_the_others(db: str) -> None:
    async with SQLiteRunStore(db) as store:
        await store.create_run("r", meta=META, script="s")
        async with anyio.create_task_group() as tg:
            with anyio.CancelScope() as scope:
                scope.cancel()
                await store.commit_journal([entry("r", 1)])
            for seq in range(2, 21):
                tg.start_soon(store.commit_journal, [entry("r", seq)])
        assert [e.seq for e in await store.journal("r")] == list(range(1, 21))


# ---- listing and status ----------------------------------------------------------------------

async def test_list_runs_newest_first(db: str) -> None:
    async with SQLiteRunStore(db) as store:
        for index, created in enumerate([100.0, 300.0, 200.0, 300.0]):
            await store.create_run(f"r{index}", meta=META, script="s", created_at=created)
        await store.finish_run("r2", status="error", result={"stop_reason": "error"})
        assert [r.id for r in await store.list_runs()] == ["r3", "r1", "r2", "r0"]
        assert [r.id for r in await store.list_runs(limit=2)] == ["r3", "r1"]
        assert [r.id for r in await store.list_runs(status="error")] == ["r2"]
        assert [r.id for r in await store.list_runs(status="running", limit=2)] == ["r3", "r1"]


async def test_status_transitions(db: str) -> None:
    async with SQLiteRunStore(db) as store:
        for run_id in ("a", "b", "c"):
            await store.create_run(run_id, meta=META, script="s")
        done = await store.finish_run("a", status="completed", result={"value": [1]}, agents=3,
                                      replayed=2, usage=Usage(input_tokens=10, output_tokens=4))
        assert (done.status, done.result, done.agents, done.replayed) == (
            "completed", {"value": [1]}, 3, 2)
        assert done.usage == Usage(input_tokens=10, output_tokens=4)
        assert done.ended_at is not None and done.ended_at >= done.created_at
        assert (await store.finish_run("b", status="cancelled")).status == "cancelled"
        assert (await store.finish_run("c", status="error")).status == "error"
        with pytest.raises(RunStoreError, match="not running"):
            await store.finish_run("a", status="error")
        with pytest.raises(RunStoreError, match="no such run"):
            await store.finish_run("ghost", status="completed")
        with pytest.raises(ValueError):
            await store.finish_run("a", status="running")  # type: ignore[arg-type]  # deliberately wrong
        with pytest.raises(ValueError):
            await store.finish_run("a", status="interrupted")  # type: ignore[arg-type]  # deliberately wrong
        assert (await store.get_run("a")) == done


async def test_a_closed_store_leaves_its_running_runs_interrupted(db: str) -> None:
    async with SQLiteRunStore(db) as first:
        await first.create_run("left", meta=META, script="s")
        async with SQLiteRunStore(db) as other:  # another store, same file, same process
            assert (await other.get_run("left")).status == "running"  # type: ignore[union-attr]  # None fails the test anyway
    async with SQLiteRunStore(db) as later:
        run = await later.get_run("left")
        assert run is not None and run.status == "interrupted" and run.ended_at is not None
        with pytest.raises(RunStoreError, match="not running"):
            await later.finish_run("left", status="completed")
        assert [r.id for r in await later.list_runs(status="interrupted")] == ["left"]
        assert await later.list_runs(status="running") == []
    with sqlite3.connect(db) as conn:  # and it is marked so in the file
        assert conn.execute("SELECT status FROM runs").fetchone() == ("interrupted",)


# ---- real processes ----------------------------------------------------------------------------

async def _start(*args: str) -> Process:
    return await anyio.open_process([sys.executable, CHILD, *args], stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE)


class _Lines:
    """Collects a child's stdout; ``ready`` is set on its first line."""

    def __init__(self) -> None:
        self.text = ""
        self.ready = anyio.Event()

    async def read(self, process: Process) -> None:
        assert process.stdout is not None
        async for chunk in process.stdout:
            self.text += chunk.decode()
            if "\n" in self.text:
                self.ready.set()
        self.ready.set()

    def complete_lines(self) -> list[str]:
        return self.text.split("\n")[:-1]  # a line cut by the kill has no newline yet


async def test_two_processes_write_the_same_file(db: str) -> None:
    async with SQLiteRunStore(db) as store:
        await store.open()
    children = [(await _start("batch", db, prefix, "8", "200"), _Lines()) for prefix in "pq"]
    async with anyio.create_task_group() as tg:
        for process, lines in children:
            tg.start_soon(lines.read, process)
        with anyio.fail_after(60):
            for _, lines in children:
                await lines.ready.wait()  # both have the file open
            for process, _ in children:
                assert process.stdin is not None
                await process.stdin.send(b"go\n")  # and now write at the same time
            for process, _ in children:
                await process.wait()
    for process, lines in children:
        await process.aclose()
        assert process.returncode == 0
        assert lines.complete_lines() == ["ready", "done"]
    async with SQLiteRunStore(db) as store:
        runs = await store.list_runs()
        assert sorted(r.id for r in runs) == sorted(f"{p}-{i}" for p in "pq" for i in range(8))
        for run in runs:
            assert run.status == "completed" and run.agents == 200
            assert [e.data["n"] for e in await store.events(run.id)] == list(range(1, 201))
            assert [e.seq for e in await store.journal(run.id)] == list(range(1, 201))


async def test_a_live_owner_in_another_process_keeps_its_run_running(db: str) -> None:
    process = await _start("hold", db, "held")
    lines = _Lines()
    async with process, anyio.create_task_group() as tg:
        tg.start_soon(lines.read, process)
        with anyio.fail_after(30):
            await lines.ready.wait()
        assert lines.complete_lines() == ["ready"]
        async with SQLiteRunStore(db) as store:
            assert (await store.get_run("held")).status == "running"  # type: ignore[union-attr]  # None fails the test anyway
            assert process.stdin is not None
            await process.stdin.aclose()  # the child exits without finishing its run
            with anyio.fail_after(30):
                await process.wait()
            start = time.monotonic()
            run = await store.get_run("held")
            assert run is not None and run.status == "interrupted"
            assert time.monotonic() - start < 3


@pytest.mark.parametrize("link", ["file", "folder"])
async def test_a_store_read_through_a_symlink_keeps_a_live_run_running(
        tmp_path: Path, db: str, link: str) -> None:
    """A run live in another process, its store read through a symlink (to the file or to its
    folder) by a third process (`runs`) and by this one: it stays `running`, in the file too."""
    if link == "file":
        linked = tmp_path / "linked.sqlite3"
        linked.symlink_to(db)
    else:
        (tmp_path / "alias").symlink_to(tmp_path, target_is_directory=True)
        linked = tmp_path / "alias" / "runs.sqlite3"
    process = await _start("hold", db, "held")
    lines = _Lines()
    async with process, anyio.create_task_group() as tg:
        tg.start_soon(lines.read, process)
        with anyio.fail_after(30):
            await lines.ready.wait()
        listed = await anyio.run_process(
            [sys.executable, "-m", "dsh_workflow", "runs", "--store", str(linked)], check=False)
        assert listed.returncode == 0, listed.stderr.decode()
        assert "held" in listed.stdout.decode() and "running" in listed.stdout.decode()
        assert "interrupted" not in listed.stdout.decode()
        async with SQLiteRunStore(linked) as store:
            assert (await store.get_run("held")).status == "running"  # type: ignore[union-attr]  # None fails the test anyway
        async with SQLiteRunStore(db) as store:  # nothing was marked in the file
            assert (await store.get_run("held")).status == "running"  # type: ignore[union-attr]  # None fails the test anyway
        assert process.stdin is not None
        await process.stdin.aclose()
        with anyio.fail_after(30):
            await process.wait()
    async with SQLiteRunStore(linked) as store:  # a dead owner still reads interrupted
        assert (await store.get_run("held")).status == "interrupted"  # type: ignore[union-attr]  # None fails the test anyway


async def test_kill_9_at_random_moments_loses_nothing_the_script_received(db: str) -> None:
    """Children commit journal entries non-stop and print each seq once its commit returned;
    each is killed with SIGKILL at a random moment. Afterwards the store opens cleanly, the run
    reads ``interrupted`` within seconds, and every printed seq is in its journal."""
    seed = random.randrange(2**32)
    rng = random.Random(seed)
    rounds, width = 4, 3
    checked = 0
    for round_ in range(rounds):
        children = []
        for index in range(width):
            run_id = f"crash-{round_}-{index}"
            children.append((run_id, await _start("crash", db, run_id, "8"), _Lines()))
        async with anyio.create_task_group() as tg:
            for _, process, lines in children:
                tg.start_soon(lines.read, process)

            async def kill_later(process: Process, lines: _Lines, delay: float) -> None:
                with anyio.fail_after(30):
                    await lines.ready.wait()
                await anyio.sleep(delay)
                process.kill()
                await process.wait()

            for _, process, lines in children:
                tg.start_soon(kill_later, process, lines, rng.choice([0.0, 0.001, 0.01])
                              if rng.random() < 0.3 else rng.uniform(0.0, 0.25))
        for _, process, _ in children:
            await process.aclose()
        with sqlite3.connect(db) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",), seed
        async with SQLiteRunStore(db) as store:
            for run_id, process, lines in children:
                assert process.returncode == -9, (seed, run_id, process.returncode)
                out = lines.complete_lines()
                assert out and out[0] == "ready", (seed, run_id, out[:3])
                printed = {int(line) for line in out[1:]}
                run = await await_until(functools.partial(settled_run, store, run_id),
                                        what=f"run {run_id} to stop reading running (seed {seed})",
                                        timeout=5)
                assert run.status == "interrupted", (seed, run_id)
                journaled = {e.seq for e in await store.journal(run_id)}
                missing = printed - journaled
                assert not missing, (seed, run_id, sorted(missing)[:10])
                checked += len(printed)
    assert checked > 0, seed  # some children got far enough to receive values


# ---- failures: one clear error, quickly -------------------------------------------------------

async def test_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "junk.sqlite3"
    path.write_bytes(b"this is not a database, just text " * 200)
    start = time.monotonic()
    with pytest.raises(RunStoreError, match="not a SQLite database") as caught:
        async with SQLiteRunStore(path):
            pass
    assert caught.value.path == str(path)
    assert time.monotonic() - start < 5


async def test_another_programs_database_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "other.sqlite3"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
    with pytest.raises(RunStoreError, match="another program"):
        async with SQLiteRunStore(path):
            pass
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA application_id = 12345")
    with pytest.raises(RunStoreError, match="another program"):
        async with SQLiteRunStore(path):
            pass


async def test_a_locked_database_fails_after_the_busy_timeout(db: str) -> None:
    async with SQLiteRunStore(db) as store:
        await store.open()
    locker = sqlite3.connect(db, isolation_level=None)
    locker.execute("BEGIN EXCLUSIVE")
    store = SQLiteRunStore(db, busy_timeout_s=0.3)
    try:
        start = time.monotonic()
        with pytest.raises(RunStoreError, match="locked"):
            await store.open()  # opening may already need the lock; writing surely does
            await store.create_run("r", meta=META, script="s")
        assert time.monotonic() - start < 3
        locker.execute("ROLLBACK")  # the lock goes away: the same store works again
        await store.create_run("r", meta=META, script="s")
        assert (await store.get_run("r")) is not None
    finally:
        locker.close()
        await store.aclose()


async def test_every_wait_is_bounded_even_when_the_writer_is_stuck(db: str) -> None:
    async with SQLiteRunStore(db) as store:
        await store.open()
    locker = sqlite3.connect(db, isolation_level=None)
    locker.execute("BEGIN EXCLUSIVE")
    try:
        store = SQLiteRunStore(db, busy_timeout_s=8.0, timeout_s=0.5)
        start = time.monotonic()
        with pytest.raises(RunStoreError, match="no answer"):
            await store.open()  # the writer waits up to 8 s for the lock; the caller does not
        assert time.monotonic() - start < 3
    finally:
        locker.execute("ROLLBACK")
        locker.close()
    await store.aclose()


def _make_read_only(path: str) -> bool:
    """Make ``path`` unwritable even for root where possible; False when it cannot be done."""
    if os.geteuid() != 0:
        os.chmod(path, 0o444)
        return True
    chattr = shutil.which("chattr")
    if chattr is None:
        return False
    return subprocess.run([chattr, "+i", path], capture_output=True).returncode == 0


async def test_a_read_only_file(db: str) -> None:
    async with SQLiteRunStore(db) as store:
        await store.create_run("old", meta=META, script="s")
        await store.finish_run("old", status="completed", result={"value": 1})
    for suffix in ("-wal", "-shm"):
        assert not os.path.exists(db + suffix)  # closed cleanly: only the file itself is left
    if not _make_read_only(db):
        pytest.skip("cannot make a file read-only here (root without chattr)")
    try:
        start = time.monotonic()
        with pytest.raises(RunStoreError, match=r"read-only|readonly|cannot be opened"):
            async with SQLiteRunStore(db) as store:
                await store.create_run("new", meta=META, script="s")
        assert time.monotonic() - start < 5
    finally:
        if os.geteuid() == 0:
            subprocess.run(["chattr", "-i", db], capture_output=True)  # noqa: ASYNC221 - a quick cleanup
        else:
            os.chmod(db, 0o644)


async def test_a_closed_store_refuses_work_and_leaves_no_thread(db: str) -> None:
    store = SQLiteRunStore(db)
    with pytest.raises(RunStoreError, match="not open"):
        store.get_run_sync("r")
    async with store:
        await store.create_run("r", meta=META, script="s")
        assert {f"dsh-workflow-store {store.path}", f"dsh-workflow-store-watchdog {store.path}"
                } <= {t.name for t in threading.enumerate()}
    assert not [t for t in threading.enumerate() if t.name.endswith(store.path)]
    with pytest.raises(RunStoreError, match="closed"):
        await store.create_run("r2", meta=META, script="s")
    with pytest.raises(RunStoreError, match="closed"):
        await store.get_run("r")
    with pytest.raises(RunStoreError, match="closed"):
        store.post_events("r", [{"late": True}])
    with pytest.raises(RunStoreError, match="closed"):
        await store.commit_journal([entry("r", 1)])
    await store.aclose()  # idempotent


def test_synchronous_option_is_checked_and_applied(db: str) -> None:
    with pytest.raises(ValueError):
        SQLiteRunStore(db, synchronous="OFF")  # type: ignore[arg-type]  # deliberately wrong
    conn = connect(db, synchronous="FULL", busy_timeout_s=1)
    try:
        assert conn.execute("PRAGMA synchronous").fetchone() == (2,)
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    finally:
        conn.close()


# ---- schema versions -----------------------------------------------------------------------

async def test_a_version_0_file_made_by_hand_is_upgraded(tmp_path: Path) -> None:
    path = tmp_path / "v0.sqlite3"
    with sqlite3.connect(path) as conn:  # a real, empty SQLite file at version 0
        conn.execute("PRAGMA user_version = 0")
        conn.execute("VACUUM")
    assert path.stat().st_size > 0
    async with SQLiteRunStore(path) as store:
        await store.create_run("r", meta=META, script="s")
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        assert conn.execute("PRAGMA application_id").fetchone() == (APPLICATION_ID,)


def test_migrations_run_step_by_step_and_all_or_nothing(tmp_path: Path) -> None:
    path = str(tmp_path / "v1.sqlite3")
    conn = connect(path, synchronous="NORMAL", busy_timeout_s=1)
    try:
        assert migrate(conn, path) == 0  # a fresh file: every step
        conn.execute("INSERT INTO runs (id, meta, script, created_at, status) "
                     "VALUES ('r', '{}', 's', 1.0, 'completed')")
        applied: list[int] = []

        def add_column(c: sqlite3.Connection) -> None:
            applied.append(len(MIGRATIONS))
            c.execute("ALTER TABLE runs ADD COLUMN note TEXT DEFAULT 'migrated'")

        def broken(c: sqlite3.Connection) -> None:
            applied.append(len(MIGRATIONS) + 1)
            c.execute("CREATE TABLE half (x)")
            raise sqlite3.OperationalError("step failed")

        with pytest.raises(sqlite3.OperationalError):
            migrate(conn, path, (*MIGRATIONS, add_column, broken))
        assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        assert "note" not in [row[1] for row in conn.execute("PRAGMA table_info(runs)")]
        assert not conn.execute("SELECT 1 FROM sqlite_schema WHERE name = 'half'").fetchone()

        applied.clear()
        assert migrate(conn, path, (*MIGRATIONS, add_column)) == SCHEMA_VERSION
        assert applied == [SCHEMA_VERSION]  # only the missing step ran
        assert conn.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION + 1,)
        assert conn.execute("SELECT note FROM runs").fetchone() == ("migrated",)
    finally:
        conn.close()


async def test_a_version_1_file_with_runs_is_upgraded_to_the_current_schema(tmp_path: Path) -> None:
    path = str(tmp_path / "old.sqlite3")
    conn = connect(path, synchronous="NORMAL", busy_timeout_s=1)
    try:
        migrate(conn, path, MIGRATIONS[:1])  # exactly what the first two releases wrote
        conn.execute("INSERT INTO runs (id, meta, script, created_at, ended_at, status, agents, "
                     "input_tokens, output_tokens) VALUES ('old', '{\"name\": \"demo\"}', "
                     "'return 1', 1.0, 2.0, 'completed', 3, 10, 20)")
        conn.execute("INSERT INTO journal (run_id, kind, seq, key, text, input_tokens, "
                     "output_tokens) VALUES ('old', 'agent', 1, 'k1', 'answer', 10, 20)")
    finally:
        conn.close()
    async with SQLiteRunStore(path) as store:
        run = await store.get_run("old")
        assert run is not None and run.status == "completed" and run.agents == 3
        assert run.usage.input_tokens == 10 and run.usage.output_tokens == 20
        [entry] = await store.journal("old", kind="agent")
        assert entry.text == "answer" and entry.key == "k1"
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        columns = {row[1] for row in raw.execute("PRAGMA table_info(runs)")}
        assert {"agents_failed", "cost_usd", "provider", "cancel_requested"} <= columns
        assert raw.execute("SELECT agents_failed, cost_usd, provider FROM runs").fetchone() == (
            0, None, None)
        journal = {row[1] for row in raw.execute("PRAGMA table_info(journal)")}
        assert {"cost_usd", "cache_read_tokens", "cache_write_tokens"} <= journal
        assert raw.execute("SELECT count(*) FROM calls").fetchone() == (0,)


async def test_a_version_2_journal_keeps_its_rows_and_takes_race_winners(tmp_path: Path) -> None:
    path = str(tmp_path / "v2.sqlite3")
    conn = connect(path, synchronous="NORMAL", busy_timeout_s=1)
    try:
        migrate(conn, path, MIGRATIONS[:2])  # what the third release wrote
        conn.execute("INSERT INTO runs (id, meta, script, created_at, status) "
                     "VALUES ('old', '{}', 's', 1.0, 'completed')")
        conn.execute("INSERT INTO journal (run_id, kind, seq, key, text, input_tokens, "
                     "output_tokens, cost_usd) VALUES ('old', 'agent', 1, 'k1', 'answer', 10, "
                     "20, 0.5)")
        conn.execute("INSERT INTO journal (run_id, kind, seq, key, number) "
                     "VALUES ('old', 'clock', 1, '', 42.0)")
        with pytest.raises(sqlite3.IntegrityError):
            conn.execute("INSERT INTO journal (run_id, kind, seq, key, number) "
                         "VALUES ('old', 'race', 1, '', 1.0)")
    finally:
        conn.close()
    async with SQLiteRunStore(path) as store:
        await store.commit_journal([JournalEntry(run_id="old", seq=1, kind="race", number=2.0)])
        entries = await store.journal("old")
    assert {(e.kind, e.seq, e.text, e.number) for e in entries} == {
        ("agent", 1, "answer", None), ("clock", 1, None, 42.0), ("race", 1, None, 2.0)}
    agent = next(e for e in entries if e.kind == "agent")
    assert agent.usage is not None and agent.usage.cost_usd == 0.5
    with sqlite3.connect(path) as raw:
        assert raw.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        assert raw.execute("PRAGMA foreign_key_check").fetchall() == []


async def test_a_newer_file_is_refused(db: str) -> None:
    with sqlite3.connect(db) as conn:
        conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    with pytest.raises(RunStoreError, match="newer"):
        async with SQLiteRunStore(db):
            pass


def test_records_are_frozen() -> None:
    record = RunRecord(id="r", meta={}, script="s", created_at=1.0)
    with pytest.raises(ValueError):
        record.status = "completed"  # type: ignore[misc]  # deliberately writing a frozen record
    assert json.loads(record.model_dump_json())["status"] == "running"


async def test_events_may_be_pydantic_models(db: str) -> None:
    from dsh_workflow import AgentEnded, RunInfo, WorkflowMeta

    event = AgentEnded(run=RunInfo(id="r", meta=WorkflowMeta.model_validate(META)), seq=3, label="c",
                       outcome="completed")
    async with SQLiteRunStore(db) as store:
        await store.create_run("r", meta=META, script="s")
        await store.append_events("r", [event, {"plain": True}])
        stored = await store.events("r")
        assert stored[0].data == json.loads(event.model_dump_json())
        assert stored[1].data == {"plain": True}
        with pytest.raises(TypeError):
            store.post_events("r", [[1, 2]])  # type: ignore[list-item]  # deliberately wrong


async def test_lock_files_of_dead_owners_are_swept(db: str) -> None:
    folder = Path(db + "-owners")
    folder.mkdir()
    (folder / "0123dead.lock").write_text("1 elsewhere\n")  # nobody holds it: a dead owner
    async with SQLiteRunStore(db) as store:
        await store.create_run("r", meta=META, script="s")
        assert not (folder / "0123dead.lock").exists()
        assert len(list(folder.glob("*.lock"))) == 1  # this store's own
    assert list(folder.glob("*.lock")) == []  # released on close

"""A run store that fails in the middle of a run ends the run with a clear error (docs/durable-runs.md).

The store file is sabotaged from inside the provider at the run's fifth ``agent()`` call, so the
failure lands between two journal commits of a live run: the file made read-only (immutable),
replaced by a file of garbage, removed, or locked by another connection holding an exclusive
transaction. Each time, on both engines: the run ends ``error`` within a bounded time with a
message naming the store and the reason, the script never receives a value whose entry was not
committed (the run stops at the failing commit), ``WorkflowEnded`` fires once, and when the
engine has exited no store thread, run thread or child process is left.
"""

from __future__ import annotations

import os
import re
import shutil
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

from dsh_workflow import (
    EngineConfig,
    QuickJSEngine,
    SQLiteRunStore,
    SubagentRequest,
    SubagentResult,
    SubprocessEngine,
    WorkflowEnded,
    WorkflowStartRequest,
)
from dsh_workflow._errors import ENGINE_FAILED

sys.path.insert(0, str(Path(__file__).parent))
from _support import await_until, child_pids

pytestmark = pytest.mark.anyio

META = {"name": "store-failure", "description": "a store that fails mid-run"}
SCRIPT = ("let last = null;\n"
          "for (let i = 0; i < 40; i++) last = await agent('step ' + i);\n"
          "return last;")
SABOTAGE_AT = 5
ENGINES = [
    "quickjs",
    pytest.param("subprocess", marks=pytest.mark.skipif(
        not sys.platform.startswith("linux"), reason="SubprocessEngine is checked on Linux")),
]
BOUND_S = 10.0  # sabotage → result, on a loaded machine (the store waits 0.5 s for a lock)


def _immutable(path: str, on: bool) -> bool:
    """``chattr ±i`` (root) or ``chmod`` (others); False when it cannot be done here."""
    if os.geteuid() != 0:
        os.chmod(path, 0o444 if on else 0o644)
        return True
    chattr = shutil.which("chattr")
    if chattr is None:
        return False
    return subprocess.run([chattr, "+i" if on else "-i", path],
                          capture_output=True).returncode == 0


class Sabotage:
    """What is done to the store file, and the reason the error must give."""

    def __init__(self, db: str, how: str) -> None:
        self.db = db
        self.how = how
        self.locker: sqlite3.Connection | None = None
        self.immutable: list[str] = []
        self.at: float | None = None

    @property
    def reason(self) -> str:
        return {"read-only": r"could not be read or written|read-only",
                "replaced by garbage": r"replaced by another file",
                "removed": r"removed",
                "locked": r"locked by another connection"}[self.how]

    def possible(self) -> bool:
        if self.how != "read-only":
            return True
        if os.geteuid() != 0:
            # an open file descriptor keeps writing to a file chmod-ed read-only
            return False
        return shutil.which("chattr") is not None

    def __call__(self) -> None:
        self.at = time.monotonic()
        if self.how == "read-only":
            # The database and its log; not the shared-memory index (SQLite maps it: an
            # immutable map would fault the process, which no store can turn into an error).
            for path in (self.db, self.db + "-wal"):
                if os.path.exists(path) and _immutable(path, True):
                    self.immutable.append(path)
            assert self.immutable
        elif self.how == "replaced by garbage":
            junk = self.db + ".junk"
            Path(junk).write_bytes(b"this is not a database " * 4000)
            os.replace(junk, self.db)
        elif self.how == "removed":
            os.unlink(self.db)
        else:
            self.locker = sqlite3.connect(self.db, isolation_level=None, timeout=1.0)
            self.locker.execute("BEGIN EXCLUSIVE")

    def undo(self) -> None:
        for path in self.immutable:
            _immutable(path, False)
        if self.locker is not None:
            self.locker.execute("ROLLBACK")
            self.locker.close()


class SabotagingProvider:
    """Answers at once; at the ``SABOTAGE_AT``-th call it runs ``act`` first."""

    identity = "sabotage"

    def __init__(self, act: Callable[[], None]) -> None:
        self.act = act
        self.calls = 0

    async def run(self, request: SubagentRequest) -> SubagentResult:
        self.calls += 1
        if self.calls == SABOTAGE_AT:
            self.act()
        await anyio.lowlevel.checkpoint()
        return SubagentResult(stop_reason="completed", text="answer " + request.prompt)


def engine_for(kind: str, provider: Any, store: SQLiteRunStore) -> Any:
    if kind == "quickjs":
        return QuickJSEngine(EngineConfig(), provider=provider, store=store)
    return SubprocessEngine(EngineConfig(), provider=provider, store=store, pool_size=1)


def our_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("dsh-workflow")}


@pytest.mark.parametrize("how", ["read-only", "replaced by garbage", "removed", "locked"])
@pytest.mark.parametrize("kind", ENGINES)
async def test_a_store_failing_mid_run_ends_it_with_a_clear_error(
        kind: str, how: str, tmp_path: Path) -> None:
    db = str(tmp_path / "runs.sqlite3")
    sabotage = Sabotage(db, how)
    if not sabotage.possible():
        pytest.skip("cannot make an open file read-only here (needs root and chattr)")
    threads_before = our_threads()
    children_before = child_pids()
    provider = SabotagingProvider(sabotage)
    store = SQLiteRunStore(db, busy_timeout_s=0.5, timeout_s=5.0)
    ended: list[WorkflowEnded] = []
    try:
        with anyio.fail_after(60):
            async with engine_for(kind, provider, store) as engine:
                engine.events.subscribe(
                    lambda e: ended.append(e) if isinstance(e, WorkflowEnded) else None)
                run = engine.start(WorkflowStartRequest(meta=META, script=SCRIPT))
                result = await run.result()
                assert sabotage.at is not None
                took = time.monotonic() - sabotage.at
                await run.dispose()
                await anyio.sleep(0.05)  # a second WorkflowEnded would have arrived by now
    finally:
        sabotage.undo()
    assert result.stop_reason == "error", (result.stop_reason, result.value)
    assert result.error is not None and db in result.error, result.error
    assert "run store" in result.error, result.error
    assert result.error_code == ENGINE_FAILED, result
    assert re.search(sabotage.reason, result.error), result.error
    assert took < BOUND_S, took
    # the run stopped at the failing commit: no later call was made
    assert provider.calls <= SABOTAGE_AT + 1, provider.calls
    assert result.agents_started == provider.calls
    assert [e.run.id for e in ended] == [run.id]
    assert ended[0].stop_reason == "error" and ended[0].error == result.error
    assert ended[0].error_code == result.error_code
    assert store.is_open is False  # the engine opened it, the engine closed it
    await await_until(lambda: not our_threads() - threads_before,
                      what="the store's and the run's threads to end", timeout=10)
    await await_until(lambda: not child_pids() - children_before,
                      what="the engine's child processes to end", timeout=10)


async def test_a_replaced_file_fails_the_next_write_instead_of_losing_it(tmp_path: Path) -> None:
    """SQLite keeps writing to the unlinked old file when the path is renamed over: the store
    checks the path before each transaction, so the write fails instead of vanishing."""
    from dsh_workflow import JournalEntry, RunStoreError

    db = str(tmp_path / "runs.sqlite3")
    async with SQLiteRunStore(db) as store:
        await store.create_run("r", meta=META, script="s")
        await store.commit_journal([JournalEntry(run_id="r", seq=1, key="k", text="1")])
        other = str(tmp_path / "other.sqlite3")
        async with SQLiteRunStore(other) as second:
            await second.open()
        os.replace(other, db)  # a valid database, but not the one the writer has open
        with pytest.raises(RunStoreError, match="replaced by another file") as caught:
            await store.commit_journal([JournalEntry(run_id="r", seq=2, key="k", text="2")])
        assert caught.value.path == db

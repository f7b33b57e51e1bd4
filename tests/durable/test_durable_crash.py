"""Crash safety of durable runs, with real processes on real engines (docs/durable-runs.md).

A child process (``_durable_child.py``) runs a long workflow on an engine with a
``SQLiteRunStore`` and prints every value its script received; the test kills it with SIGKILL
at a random moment: right after start (before any commit), after the k-th received value
(commits in flight; with ``parallel`` up to 32 at once), or after a random delay. After each
kill the store file passes ``PRAGMA integrity_check``, the run reads ``interrupted`` within
seconds, every printed value is in the run's journal, and no process of the child is left.
Then the test resumes the run in its own process: it completes, exactly the journaled calls
are replayed (``agents_replayed`` = the journal's agent entries) and the provider is asked
only for the others.

The moments are random but reproducible: the seed comes from ``DSH_CRASH_SEED`` when it is set
(else a fresh one), is printed when the test starts, and is in every assertion message and in a
note on any other failure (``DSH_CRASH_SEED=<seed> pytest ...`` replays the same choices, the
children's provider pauses included). Each test instance has a time budget (the machine is
shared), so the kills per instance are few but the moments are varied.
"""

from __future__ import annotations

import functools
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from _support import alive, await_until, settled_run
from anyio.abc import Process

from dsh_workflow import (
    AgentStarted,
    QuickJSEngine,
    SQLiteRunStore,
    SubagentRequest,
    SubagentResult,
    SubprocessEngine,
    WorkflowStartRequest,
)

sys.path.insert(0, str(Path(__file__).parent))
from _durable_child import META, SCRIPTS, config

pytestmark = pytest.mark.anyio

CHILD = str(Path(__file__).with_name("_durable_child.py"))
N = {"sequential": 300, "parallel": 600}
ENGINES = [
    "quickjs",
    pytest.param("subprocess", marks=pytest.mark.skipif(
        not sys.platform.startswith("linux"), reason="SubprocessEngine is checked on Linux")),
]


def backend_name(anyio_backend: Any) -> str:
    return anyio_backend if isinstance(anyio_backend, str) else anyio_backend[0]


@dataclass
class Child:
    """One child run and what it printed."""

    shape: str
    moment: tuple[str, float]  # see pick_moment
    process: Process | None = None
    text: str = ""
    run_id: str | None = None
    got: int = 0
    started: anyio.Event = field(default_factory=anyio.Event)
    enough: anyio.Event = field(default_factory=anyio.Event)
    grandchildren: set[int] = field(default_factory=set)

    def lines(self) -> list[str]:
        return self.text.split("\n")[:-1]  # a line cut by the kill has no newline yet

    def received(self) -> list[str]:
        return [line[len("got "):] for line in self.lines() if line.startswith("got ")]


def descendants(pid: int) -> set[int]:
    found: set[int] = set()
    todo = [pid]
    while todo:
        current = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{current}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{current}/task/{task}/children") as handle:
                    kids = {int(x) for x in handle.read().split()}
            except OSError:
                continue
            todo.extend(kids - found)
            found |= kids
    return found


async def read_child(child: Child) -> None:
    assert child.process is not None and child.process.stdout is not None
    async for chunk in child.process.stdout:
        child.text += chunk.decode()
        if child.run_id is None and "\n" in child.text:
            first = child.text.split("\n", 1)[0]
            assert first.startswith("run "), first
            child.run_id = first[len("run "):]
            child.started.set()
        child.got = child.text.count("\ngot ")
        if child.moment[0] in ("values", "self") and child.got >= child.moment[1]:
            child.enough.set()
    child.started.set()
    child.enough.set()


async def kill_child(child: Child) -> None:
    assert child.process is not None
    linux = sys.platform.startswith("linux")
    with anyio.fail_after(30):
        await child.started.wait()
        if linux:
            child.grandchildren = descendants(child.process.pid)
        what, amount = child.moment
        if what in ("values", "self"):
            await child.enough.wait()
        elif amount:
            await anyio.sleep(amount)
        if linux:
            child.grandchildren |= descendants(child.process.pid)
        if what == "self":
            await child.process.wait()  # it kills itself right after the k-th value
        else:
            child.process.send_signal(signal.SIGKILL)
            await child.process.wait()


def pick_moment(rng: random.Random, shape: str) -> tuple[str, float]:
    """When to kill: ``("start", s)`` s seconds after the run started (before or around its
    first commits); ``("values", k)`` once the test has read the k-th received value (commits
    in flight); ``("self", k)`` the child kills itself right after printing the k-th value;
    ``("delay", s)`` after up to 2 s (some land after the run ended)."""
    roll = rng.random()
    if roll < 0.15:
        return ("start", rng.choice([0.0, 0.001, 0.005, 0.02]))
    if roll < 0.5:
        return ("values", rng.randint(1, N[shape] - 1))
    if roll < 0.85:
        return ("self", rng.randint(1, N[shape] - 1))
    return ("delay", rng.uniform(0.0, 2.0))


class CountingProvider:
    """The resume's provider: answers like the child's, and records every prompt it is asked."""

    identity = "jitter"  # the same identity as the child's provider: its answers replay

    def __init__(self) -> None:
        self.prompts: list[str] = []

    async def run(self, request: SubagentRequest) -> SubagentResult:
        self.prompts.append(request.prompt)
        await anyio.lowlevel.checkpoint()
        return SubagentResult(stop_reason="completed", text="answer " + request.prompt)


def engine_for(kind: str, provider: Any, store: SQLiteRunStore, n: int) -> Any:
    if kind == "quickjs":
        return QuickJSEngine(config(n), provider=provider, store=store)
    return SubprocessEngine(config(n), provider=provider, store=store, pool_size=1)


async def check_after_kill(store: SQLiteRunStore, child: Child, why: str) -> list[Any]:
    """The checks after one kill; returns the run's agent journal entries."""
    assert child.process is not None and child.process.returncode == -signal.SIGKILL, why
    received = child.received()
    if child.run_id is None:
        assert not received, why
        return []
    run_id = child.run_id
    if await store.get_run(run_id) is None:
        # killed before the run was recorded: then the script cannot have received a value
        # (and nothing records it later: its process is gone)
        assert not received, why
        return []

    run = await await_until(functools.partial(settled_run, store, run_id),
                            what=f"the run to stop reading running after the kill: {why}",
                            timeout=5)
    finished = any(line.startswith("end ") for line in child.lines())
    assert run.status == ("completed" if finished else "interrupted"), (run.status, why)
    entries = await store.journal(child.run_id, kind="agent")
    journaled = {entry.text for entry in entries}
    missing = [value for value in received if value not in journaled]
    assert not missing, f"received but not journaled: {missing[:5]} ({len(missing)}) {why}"
    assert len({entry.seq for entry in entries}) == len(entries), why
    # every process of the child went with it (the sandboxed runtime exits when its parent dies)
    await await_until(lambda: not [pid for pid in child.grandchildren if alive(pid)],
                      what=f"the child's processes {sorted(child.grandchildren)} to go after "
                           f"the kill: {why}", timeout=5)
    return entries


async def resume(kind: str, store: SQLiteRunStore, child: Child, entries: list[Any],
                 why: str) -> None:
    """Resume the killed run here: it completes, replaying exactly its journaled calls."""
    n = N[child.shape]
    provider = CountingProvider()
    live_starts: list[int] = []

    def on_event(event: Any) -> None:
        if isinstance(event, AgentStarted):
            live_starts.append(event.seq)

    async with engine_for(kind, provider, store, n) as engine:
        engine.events.subscribe(on_event)
        run = engine.start(WorkflowStartRequest(
            meta=META, script=SCRIPTS[child.shape], args={"n": n}, resume_from=child.run_id))
        with anyio.fail_after(60):
            result = await run.result()
        await run.dispose()
    assert result.stop_reason == "completed", (result.error, why)
    assert result.value == (n if child.shape == "parallel" else f"answer step {n - 1}"), why
    assert result.agents_replayed == len(entries), (result.agents_replayed, len(entries), why)
    assert result.agents_started == n - len(entries), why
    asked = set(provider.prompts)
    journaled_prompts = {entry.text[len("answer "):] for entry in entries}
    assert not asked & journaled_prompts, f"replayed calls reached the provider: {why}"
    assert len(provider.prompts) == n - len(entries), why
    assert len(live_starts) == n - len(entries), why  # AgentStarted only for live calls
    record = await store.get_run(run.id)
    assert record is not None and record.status == "completed", why
    assert record.resumed_from == child.run_id and record.replayed == len(entries), why
    # a resumed run journals the replayed calls too: the new journal is complete
    assert len(await store.journal(run.id, kind="agent")) == n, why


def crash_seed() -> int:
    """The seed of the random moments: ``DSH_CRASH_SEED`` when set, else a fresh one."""
    given = os.environ.get("DSH_CRASH_SEED", "").strip()
    return int(given) if given else random.randrange(2**32)


@pytest.mark.parametrize("kind", ENGINES)
async def test_kill_9_at_random_moments_then_resume(kind: str, tmp_path: Path,
                                                     anyio_backend: Any) -> None:
    seed = crash_seed()
    print(f"DSH_CRASH_SEED={seed}")  # shown with the captured output of a failing test
    try:
        await _kill_and_resume(kind, tmp_path, anyio_backend, seed)
    except BaseException as exc:
        exc.add_note(f"the random moments came from DSH_CRASH_SEED={seed}; set it to replay them")
        raise


async def _kill_and_resume(kind: str, tmp_path: Path, anyio_backend: Any, seed: int) -> None:
    rng = random.Random(seed)
    backend = backend_name(anyio_backend)
    db = str(tmp_path / "runs.sqlite3")
    budget_end = time.monotonic() + 8  # no new round after this: four instances share ~60 s
    rounds = 0
    kills = {"interrupted": 0, "values": 0, "resumed": 0}
    while rounds < 2 and (rounds < 1 or time.monotonic() < budget_end):
        rounds += 1
        children = [Child(shape, pick_moment(rng, shape))
                    for shape in ("sequential", "parallel", rng.choice(list(SCRIPTS)))]
        async with anyio.create_task_group() as tg:
            for child in children:
                what, amount = child.moment
                child.process = await anyio.open_process(
                    [sys.executable, CHILD, kind, backend, db, child.shape, str(N[child.shape]),
                     str(rng.randrange(2**32)), *([str(amount)] if what == "self" else [])],
                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
                tg.start_soon(read_child, child)
                tg.start_soon(kill_child, child)
        for child in children:
            assert child.process is not None
            await child.process.aclose()
        with sqlite3.connect(db) as conn:
            assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",), seed
        async with SQLiteRunStore(db) as store:
            for child in children:
                why = (f"seed {seed}, round {rounds}, {kind}/{backend}, {child.shape} killed at "
                       f"{child.moment}, {len(child.received())} values received")
                entries = await check_after_kill(store, child, why)
                record = None if child.run_id is None else await store.get_run(child.run_id)
                if record is not None and record.status == "interrupted":
                    kills["interrupted"] += 1
                    kills["values"] += len(child.received())
                    await resume(kind, store, child, entries, why)
                    kills["resumed"] += 1
    # the random moments must have hit runs that were under way
    assert kills["interrupted"] >= 1 and kills["values"] > 0, (seed, kills)

"""Micro-benchmark of the run store's hot paths (``python -m benchmarks.store_bench``).

What it times, each against the same shape of work with no store ("nothing"):

- ``journal``: N tasks started at once, each awaiting ``commit_journal`` of one entry (the
  host's hot path: N children completing together), versus N tasks that only yield once;
- ``events``: N events posted one call each (``post_events``, as the host posts each event),
  then one ``flush``; versus N no-op calls;
- ``fanout``: what a zero-latency fan-out of N agents adds in total: per child two events
  (started, ended) and one journal commit, plus create/finish of the run and a final flush.

Prints, per case, the median wall time (with min-max) and the median CPU time of the whole
process (every thread: the loop and the store's writer), for "nothing" and with the store, and
what the store adds per item. CPU time is the steadier figure on a shared machine. Timings are
indicative; they are never asserted.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from functools import partial

import anyio
import anyio.lowlevel

from dsh_workflow import JournalEntry, SQLiteRunStore

EVENT = {"type": "AgentEnded", "seq": 1, "label": "child", "phase": None, "outcome": "completed"}


def _entry(run_id: str, seq: int) -> JournalEntry:
    return JournalEntry(run_id=run_id, seq=seq, key=f"{seq:064x}", text=f"answer {seq}")


async def _nothing_journal(n: int) -> None:
    async with anyio.create_task_group() as tg:
        for _ in range(n):
            tg.start_soon(anyio.sleep, 0)


async def _journal(store: SQLiteRunStore, run_id: str, n: int) -> None:
    entries = [_entry(run_id, seq) for seq in range(1, n + 1)]
    async with anyio.create_task_group() as tg:
        for entry in entries:
            tg.start_soon(store.commit_journal, [entry])


async def _nothing_events(n: int) -> None:
    sink = []
    for _ in range(n):
        sink.append(dict(EVENT))  # noqa: PERF401 - the same per-event loop as the measured paths
    await anyio.lowlevel.checkpoint()


async def _events(store: SQLiteRunStore, run_id: str, n: int) -> None:
    for _ in range(n):
        store.post_events(run_id, [EVENT])
    await store.flush()


async def _fanout(store: SQLiteRunStore, run_id: str, n: int) -> None:
    await store.create_run(run_id, meta={"name": "bench", "description": "d"}, script="x")

    async def child(seq: int) -> None:
        store.post_events(run_id, [EVENT])
        await anyio.lowlevel.checkpoint()
        await store.commit_journal([_entry(run_id, seq)])
        store.post_events(run_id, [EVENT])

    async with anyio.create_task_group() as tg:
        for seq in range(1, n + 1):
            tg.start_soon(child, seq)
    await store.finish_run(run_id, status="completed", result={"value": n}, agents=n)
    await store.flush()


async def _fanout_nothing(n: int) -> None:
    async def child(seq: int) -> None:
        await anyio.lowlevel.checkpoint()

    async with anyio.create_task_group() as tg:
        for seq in range(1, n + 1):
            tg.start_soon(child, seq)


async def _time(fn: Callable[[], Awaitable[None]]) -> tuple[float, float]:
    gc.collect()
    cpu = time.process_time()
    start = time.perf_counter()
    await fn()
    return time.perf_counter() - start, time.process_time() - cpu


Samples = dict[str, list[tuple[float, float]]]


async def measure(n: int, reps: int, synchronous: str) -> dict[str, Samples]:
    out: dict[str, Samples] = {}
    with tempfile.TemporaryDirectory() as folder:
        async with SQLiteRunStore(os.path.join(folder, "runs.sqlite3"),
                                  synchronous=synchronous) as store:  # type: ignore[arg-type]  # a str, checked by the store
            for rep in range(reps + 1):  # the first repetition warms up
                run_id = f"run-{rep}"
                await store.create_run(run_id, meta={"name": "bench", "description": "d"},
                                       script="x")
                cases = {
                    "journal": (partial(_nothing_journal, n), partial(_journal, store, run_id, n)),
                    "events": (partial(_nothing_events, n), partial(_events, store, run_id, n)),
                    "fanout": (partial(_fanout_nothing, n),
                               partial(_fanout, store, f"fan-{rep}", n)),
                }
                for name, (nothing, with_store) in cases.items():
                    base = await _time(nothing)
                    cost = await _time(with_store)
                    if rep:
                        slot = out.setdefault(name, {"nothing": [], "store": []})
                        slot["nothing"].append(base)
                        slot["store"].append(cost)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=1000)
    parser.add_argument("--reps", type=int, default=7)
    parser.add_argument("--backend", choices=["trio", "asyncio", "both"], default="both")
    parser.add_argument("--synchronous", choices=["NORMAL", "FULL", "both"], default="both")
    ns = parser.parse_args()
    backends = ["trio", "asyncio"] if ns.backend == "both" else [ns.backend]
    syncs = ["NORMAL", "FULL"] if ns.synchronous == "both" else [ns.synchronous]
    print(f"n = {ns.n}, {ns.reps} repetitions, load average {os.getloadavg()[0]:.2f}")
    print(f"{'backend':8} {'sync':7} {'case':8} {'nothing ms':>10} {'store ms (min-max)':>24}"
          f" {'+µs/item':>9} | {'cpu: nothing':>12} {'store':>7} {'+µs/item':>9}")
    for backend in backends:
        for sync in syncs:
            figures = anyio.run(measure, ns.n, ns.reps, sync, backend=backend)
            for case, slot in figures.items():
                wall = [w * 1e3 for w, _ in slot["store"]]
                base = statistics.median(w for w, _ in slot["nothing"]) * 1e3
                cost = statistics.median(wall)
                cpu_base = statistics.median(c for _, c in slot["nothing"]) * 1e3
                cpu_cost = statistics.median(c for _, c in slot["store"]) * 1e3
                print(f"{backend:8} {sync:7} {case:8} {base:10.2f} {cost:9.2f} "
                      f"({min(wall):6.2f}-{max(wall):6.2f}) {(cost - base) * 1e3 / ns.n:9.1f} | "
                      f"{cpu_base:12.2f} {cpu_cost:7.2f} {(cpu_cost - cpu_base) * 1e3 / ns.n:9.1f}")


if __name__ == "__main__":
    main()

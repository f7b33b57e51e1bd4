"""A child process that uses a run store, for tests/durable/test_store.py (run as a script).

Modes (argv: MODE PATH ...):

- ``crash PATH RUN_ID WIDTH``: create the run, print ``ready``, then let WIDTH tasks commit
  journal entries (and post events) forever, printing each seq on its own line only after its
  ``commit_journal`` returned. Meant to be killed.
- ``batch PATH PREFIX RUNS ENTRIES``: open the store, print ``ready``, wait for a line on stdin
  (so several children can start writing together), then create RUNS runs named PREFIX-i, each
  with ENTRIES events and journal entries, finish each, print ``done``.
- ``hold PATH RUN_ID``: create the run, print ``ready`` and wait for stdin to close, then exit
  at once without finishing the run (``os._exit``).
"""

from __future__ import annotations

import os
import sys

import anyio

from dsh_workflow import JournalEntry, SQLiteRunStore


def emit(line: str) -> None:
    os.write(1, (line + "\n").encode())


async def crash(path: str, run_id: str, width: int) -> None:
    async with SQLiteRunStore(path) as store:
        await store.create_run(run_id, meta={"name": "crash"}, script="return 1")
        emit("ready")
        counter = 0

        async def committer() -> None:
            nonlocal counter
            while True:
                counter += 1
                seq = counter
                store.post_events(run_id, [{"type": "AgentEnded", "seq": seq}])
                await store.commit_journal([JournalEntry(
                    run_id=run_id, seq=seq, key=f"key-{seq}", text="v" * 200,
                    structured={"seq": seq})])
                emit(str(seq))

        async with anyio.create_task_group() as tg:
            for _ in range(width):
                tg.start_soon(committer)


async def batch(path: str, prefix: str, runs: int, entries: int) -> None:
    async with SQLiteRunStore(path) as store:
        emit("ready")
        await anyio.to_thread.run_sync(sys.stdin.readline)
        for index in range(runs):
            run_id = f"{prefix}-{index}"
            await store.create_run(run_id, meta={"name": prefix}, script="s")
            async with anyio.create_task_group() as tg:
                for seq in range(1, entries + 1):
                    store.post_events(run_id, [{"n": seq}])
                    tg.start_soon(store.commit_journal, [JournalEntry(
                        run_id=run_id, seq=seq, key=f"{prefix}-{seq}", text=str(seq))])
            await store.finish_run(run_id, status="completed", result={"value": index},
                                   agents=entries)
    emit("done")


async def hold(path: str, run_id: str) -> None:
    async with SQLiteRunStore(path) as store:
        await store.create_run(run_id, meta={"name": "hold"}, script="s")
        emit("ready")
        await anyio.to_thread.run_sync(sys.stdin.read)
        os._exit(0)


def main() -> None:
    mode, path, *rest = sys.argv[1:]
    if mode == "crash":
        anyio.run(crash, path, rest[0], int(rest[1]))
    elif mode == "batch":
        anyio.run(batch, path, rest[0], int(rest[1]), int(rest[2]))
    elif mode == "hold":
        anyio.run(hold, path, rest[0])
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main()

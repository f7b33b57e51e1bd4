"""What a resumed run replays from: the journal of the run it resumes, completed by the runs
that run resumed in turn.

A resume journals its replayed answers again, but only as its calls reach them: a resume that
dies (``kill -9``, a Ctrl-C, a script error) before it reached them all holds only part of the
answers its own earlier run held. Resuming it again must still not pay for the others, so the
answers come from the whole chain of resumes, the latest run first (docs/durable-runs.md,
"What replays").
"""

from __future__ import annotations

from collections import Counter

from ..._store import JournalEntry, RunStore

__all__ = ["MAX_CHAIN", "chain_entries"]

#: The most runs of one chain read (a chain longer than this replays from its latest runs).
MAX_CHAIN = 1000


async def chain_entries(store: RunStore, run_id: str) -> list[JournalEntry]:
    """The journal entries a resume of ``run_id`` replays from.

    Promises: every entry of ``run_id``, in its journal order; then, for each run it resumed
    (its ``resumed_from``, that run's, and so on, at most :data:`MAX_CHAIN` runs), the entries
    no later run of the chain holds a counterpart of, in that run's journal order: of each
    ``agent`` key the entries past the most any later run journaled, of ``clock`` and ``random``
    the values past the longest later sequence, and the ``race`` winners of ordinals no later run
    recorded. Raises only :class:`~dsh_workflow.RunStoreError`.
    """
    merged: list[JournalEntry] = []
    keys: Counter[str] = Counter()
    numbers: Counter[str] = Counter()
    races: set[int] = set()
    seen: set[str] = set()
    current: str | None = run_id
    while current is not None and current not in seen and len(seen) < MAX_CHAIN:
        seen.add(current)
        own_keys: Counter[str] = Counter()
        own_numbers: Counter[str] = Counter()
        own_races: set[int] = set()
        for entry in await store.journal(current):
            if entry.kind == "agent":
                own_keys[entry.key] += 1
                taken = own_keys[entry.key] > keys[entry.key]
            elif entry.kind == "race":
                own_races.add(entry.seq)
                taken = entry.seq not in races
            else:
                own_numbers[entry.kind] += 1
                taken = own_numbers[entry.kind] > numbers[entry.kind]
            if taken:
                merged.append(entry)
        keys |= own_keys  # the most of each any run so far journaled
        numbers |= own_numbers
        races |= own_races
        record = await store.get_run(current)
        current = None if record is None else record.resumed_from
    return merged

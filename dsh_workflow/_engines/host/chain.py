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
from ..._store.questions import QuestionRecord

__all__ = ["MAX_CHAIN", "chain_entries", "chain_questions"]

#: The most runs of one chain read (a chain longer than this replays from its latest runs).
MAX_CHAIN = 1000


async def _chain(store: RunStore, run_id: str) -> list[str]:
    """``run_id`` and the runs it resumed in turn, latest first (at most :data:`MAX_CHAIN`)."""
    runs: list[str] = []
    current: str | None = run_id
    while current is not None and current not in runs and len(runs) < MAX_CHAIN:
        runs.append(current)
        record = await store.get_run(current)
        current = None if record is None else record.resumed_from
    return runs


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
    for current in await _chain(store, run_id):
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
    return merged


async def chain_questions(store: RunStore, run_id: str) -> list[QuestionRecord]:
    """The questions a resume of ``run_id`` replays from (none when the store keeps none).

    Promises: per question key, in ask order, one record for each time any run of the chain
    asked it (the n-th ask of a key in each run is the same question): the latest run's answered
    record, else the latest earlier run's answered one, else the latest run's open one (an open
    question keeps its first deadline). So a resume that died between asking a replayed question
    and journaling its answer again does not make the next resume ask it. Raises only
    :class:`~dsh_workflow.RunStoreError`.
    """
    read = getattr(store, "question_records", None)
    if read is None:
        return []
    slots: dict[str, list[QuestionRecord]] = {}
    for current in await _chain(store, run_id):
        ordinal: Counter[str] = Counter()
        records: list[QuestionRecord] = await read(current)
        for record in records:
            taken = slots.setdefault(record.key, [])
            index = ordinal[record.key]
            ordinal[record.key] += 1
            if index == len(taken):
                taken.append(record)
            elif record.answered and not taken[index].answered:
                taken[index] = record
    return [record for taken in slots.values() for record in taken]

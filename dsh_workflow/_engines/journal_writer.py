"""The task that commits a durable run's answers before the script may see them."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

import anyio

from .._store import RunStoreError
from .journal import RunJournal
from .scheduler import ChildCall, ChildScheduler
from .script.wire import answer

__all__ = ["JournalWriter"]


class JournalWriter:
    """Commits completed children and calls replayed from the earlier run (so a resume of
    this run replays them too), then hands each to the scheduler to answer.

    Everything posted meanwhile is committed as one batch, then answered in call order; a
    store that fails calls ``store_failed`` (which stops the run), and those answers are never
    delivered.
    """

    def __init__(self, journal: RunJournal, scheduler: ChildScheduler,
                 store_failed: Callable[[RunStoreError], None]) -> None:
        self._journal = journal
        self._scheduler = scheduler
        self._store_failed = store_failed
        self._waiting: deque[ChildCall] = deque()
        self._wake = anyio.Event()
        scheduler.journal_writer = self

    def post(self, call: ChildCall) -> None:
        """Queue ``call`` (its reply set, or its ``replay`` found) for the next commit."""
        self._waiting.append(call)
        self._wake.set()

    def drop(self) -> None:
        """The run stops: end every call not yet committed, unanswered."""
        while self._waiting:
            self._scheduler.end_call(self._waiting.popleft())

    async def run(self) -> None:
        """The writer task; ends when the run stops (its scope is the scheduler's to cancel)."""
        journal = self._journal
        scheduler = self._scheduler
        batch: list[ChildCall] = []
        with anyio.CancelScope() as scope:
            scheduler.scopes.add(scope)
            try:
                while not scheduler.closed:
                    await self._wake.wait()
                    self._wake = anyio.Event()
                    batch = list(self._waiting)
                    self._waiting.clear()
                    if not batch:
                        continue
                    entries = []
                    for call in batch:
                        assert call.key is not None
                        earlier = call.replay
                        if earlier is not None:
                            text, structured, usage = earlier.text, earlier.structured, \
                                earlier.usage
                        else:
                            assert call.reply is not None
                            value = call.reply[2]
                            typed = call.request.schema is not None
                            text, structured, usage = (None if typed else value,
                                                       value if typed else None, call.usage)
                        entries.append(journal.entry(call.seq, call.key, text=text,
                                                     structured=structured, usage=usage))
                    try:
                        await journal.commit(entries)
                    except RunStoreError as exc:
                        self._store_failed(exc)
                        return
                    for call in batch:
                        earlier = call.replay
                        if earlier is not None:
                            value = earlier.structured if call.request.schema is not None \
                                else (earlier.text if earlier.text is not None else "")
                            call.reply, call.outcome = answer(call.call_id, value), "completed"
                        scheduler.end_call(call)
                    batch = []
            finally:
                scheduler.scopes.discard(scope)
                for call in batch:  # stopped mid-commit: close them unanswered
                    scheduler.end_call(call)

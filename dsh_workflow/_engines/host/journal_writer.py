"""The task that commits a durable run's answers before the script may see them."""

from __future__ import annotations

from collections.abc import Callable

import anyio

from ..._store import RunStoreError
from ..script.wire import answer
from .journal import RunJournal
from .ledger import CallLedger, ChildCall

__all__ = ["JournalWriter"]


class JournalWriter:
    """Commits completed children and calls replayed from the earlier run (so a resume of
    this run replays them too), then ends each in the run's :class:`~.ledger.CallLedger`, which
    answers it.

    Everything held in the ledger meanwhile is committed as one batch, then answered in call
    order; a store that fails calls ``store_failed`` (which stops the run), and those answers are
    never delivered.
    """

    def __init__(self, journal: RunJournal, calls: CallLedger,
                 store_failed: Callable[[RunStoreError], None]) -> None:
        self._journal = journal
        self._calls = calls
        self._store_failed = store_failed

    async def run(self) -> None:
        """The writer task; ends when the run stops (the ledger's close cancels its scope)."""
        journal = self._journal
        calls = self._calls
        batch: list[ChildCall] = []
        with anyio.CancelScope() as scope:
            calls.scopes.add(scope)
            try:
                while not calls.closed:
                    batch = await calls.held()
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
                        calls.end(call)
                    batch = []
            finally:
                calls.scopes.discard(scope)
                for call in batch:  # stopped mid-commit: close them unanswered
                    calls.end(call)

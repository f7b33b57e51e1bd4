"""The counts so far of the runs still going (or interrupted), kept between list refreshes.

The store totals a run's agents and tokens only when it ends; before that the list counts them
from the run's events. Contract of :class:`SoFar`:

- **Incremental.** Per run it remembers the last event seq counted and the counts up to it;
  a refresh reads only the events after that seq. A run whose events did not change costs one
  empty read.
- **Bounded per request.** One :meth:`SoFar.counts` call reads at most ``budget`` events over
  all runs (in pages of at most ``page`` events); a run it did not get to keeps the counts it
  had, and later refreshes catch up. So a list of many long unfinished runs answers in bounded
  time, the first time too.
- **A broken run** (its events cannot be read: :class:`RunStoreError`) keeps the counts it had;
  the list goes on (its page says what is wrong).
- **Forgets.** A run that is no longer unfinished, or beyond the ``keep`` most recently asked,
  is dropped.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from .._store import RunRecord, RunStore, RunStoreError
from .._tally import StoredCounts, count_stored

__all__ = ["BUDGET", "SoFar"]

#: Events read per list request at most, over all unfinished runs.
BUDGET = 100_000
PAGE = 10_000
KEEP = 10_000


class SoFar:
    """Counts so far per unfinished run of ``store`` (module docstring)."""

    def __init__(self, store: RunStore, *, budget: int = BUDGET, page: int = PAGE,
                 keep: int = KEEP) -> None:
        self._store = store
        self._budget = budget
        self._page = page
        self._keep = keep
        self._known: OrderedDict[str, tuple[int, StoredCounts]] = OrderedDict()

    async def counts(self, records: Sequence[RunRecord]) -> dict[str, StoredCounts]:
        """The counts so far of the unfinished runs among ``records``, by run id."""
        left = self._budget
        found: dict[str, StoredCounts] = {}
        for record in records:
            if record.status not in ("running", "interrupted"):
                self._known.pop(record.id, None)
                continue
            last, so_far = self._known.pop(record.id, (0, StoredCounts()))
            while left > 0:
                asked = min(left, self._page)
                try:
                    events = await self._store.events(record.id, after=last, limit=asked)
                except RunStoreError:
                    break
                if events:
                    so_far = count_stored(events, so_far)
                    last = events[-1].seq
                    left -= len(events)
                if len(events) < asked:
                    break
            self._known[record.id] = (last, so_far)  # most recently asked last
            found[record.id] = so_far
        while len(self._known) > self._keep:
            self._known.popitem(last=False)
        return found

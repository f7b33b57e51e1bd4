"""The control poll of an engine with a store: runs under control from other processes.

While an engine with a store has durable runs going, :func:`control_poll` wakes every
:data:`POLL_S` seconds and

- writes the ``calls`` rows of calls that have been open for a while (so what a slow child was
  asked can be read while it runs: :meth:`~.calls.CallLog.write_open`);
- asks the store which of those runs another process asked to cancel (``dsh-workflow cancel``,
  the viewer's Cancel button: :meth:`~dsh_workflow.SQLiteRunStore.request_cancel`) and cancels
  each with a reason naming the request's origin (``cancelled from the viewer``; without an
  origin, :data:`CANCEL_REASON`). So a request is noticed within one period plus
  one short read of the store;
- delivers to the runs that wait on questions the answers another process wrote to the store
  (the viewer, ``dsh-workflow answer --no-continue``:
  :meth:`~dsh_workflow.SQLiteRunStore.answer_question`), within the same bound.

With no run going it only sleeps. A store that cannot answer is logged once per failure
streak and tried again at the next period; it never stops a run.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable

import anyio

from ..._store import RunStore, RunStoreError
from .host import HostedRun

__all__ = ["CANCEL_REASON", "POLL_S", "control_poll"]

logger = logging.getLogger("dsh_workflow.engine")

#: How often an engine with a store looks for cancel requests.
POLL_S = 0.2
#: The reason a run cancelled by another process ends with.
CANCEL_REASON = "cancelled from the command line"


async def _reason(store: RunStore, run_id: str) -> str:
    """``cancelled from the <origin>`` of the run's cancel request, else :data:`CANCEL_REASON`."""
    origin = None
    ask = getattr(store, "cancel_origin", None)
    if ask is not None:
        try:
            origin = await ask(run_id)
        except RunStoreError:
            origin = None
    return f"cancelled from the {origin}" if isinstance(origin, str) and origin else CANCEL_REASON


async def control_poll(store: RunStore, runs: Callable[[], Iterable[HostedRun]], *,
                       period: float = POLL_S) -> None:
    """Serve the runs ``runs()`` returns (the engine's live ones) until cancelled."""
    requests = getattr(store, "cancel_requests", None)
    failing = False
    while True:
        await anyio.sleep(period)
        live = [run for run in runs() if run.journal is not None and run.journal.began]
        if not live:
            continue
        now = time.time()
        for run in live:
            calls = run.journal.calls if run.journal is not None else None
            if calls is not None:
                calls.write_open(now)
        if requests is None:
            continue
        try:
            asked = set(await requests([run.id for run in live]))
        except RunStoreError as exc:
            if not failing:
                logger.warning("dsh-workflow: cannot read cancel requests from the run store: "
                               "%s", exc)
            failing = True
            continue
        failing = False
        for run in live:
            if run.id in asked:
                run.cancel(await _reason(store, run.id))
        for run in live:
            if run.questions.waiting:
                try:
                    await run.questions.poll()
                except RunStoreError as exc:
                    logger.warning("dsh-workflow: cannot read the answers of run %s from the "
                                   "run store: %s", run.id, exc)

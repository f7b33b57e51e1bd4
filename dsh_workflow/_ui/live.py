"""The live stream of one run: its stored events as server-sent events, then its end.

Contract of ``GET /api/runs/{id}/stream`` (see :func:`run_stream`):

- ``event: events`` — ``data`` is a JSON list of ``{"seq", "at", "data"}`` (the stored event
  without its ``run`` field), in order, at most :data:`BATCH` per message; ``id`` is the last
  seq sent, so a reconnecting browser (``Last-Event-ID``) continues after it. Everything stored
  so far comes at once; afterwards the store is polled every :data:`POLL_S` seconds.
- ``event: end`` — once the run is no longer ``running`` and every event is sent: ``data`` is
  :func:`~.summary.run_payload` (status, row, error with code, and — unless the page asked
  ``result=0`` because it shows the result already — the result folded to a bounded size,
  made off the event loop); for a run whose stored record or events cannot be read, status
  ``broken`` and the error says what is wrong. The stream then closes; the page closes its
  ``EventSource`` so it does not reconnect.
"""

from __future__ import annotations

import functools
import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
from sse_starlette import ServerSentEvent

from .._store import RunStore, RunStoreError, StoredEvent
from .._text import valid_text
from .summary import run_payload

__all__ = ["BATCH", "POLL_S", "event_stream"]

POLL_S = 0.2
BATCH = 2000


def _compact(event: StoredEvent) -> dict[str, Any]:
    data = {key: value for key, value in event.data.items() if key != "run"}
    return {"seq": event.seq, "at": event.at, "data": data}


def _message(events: list[StoredEvent]) -> ServerSentEvent:
    body = valid_text(json.dumps([_compact(event) for event in events], ensure_ascii=False,
                                 separators=(",", ":")))
    return ServerSentEvent(data=body, event="events", id=str(events[-1].seq))


def _end_message(record: Any, with_result: bool) -> str:
    return valid_text(json.dumps(run_payload(record, with_result=with_result), ensure_ascii=False))


def _broken(problem: str) -> ServerSentEvent:
    """The ``end`` of a stream whose run can no longer be read: the page shows the run as
    broken and why (the same payload shape as :func:`~.summary.run_payload`)."""
    payload: dict[str, Any] = {
        "status": "broken", "row": {"duration": "-"}, "ended_at": None,
        "error": {"code": "broken run", "message": problem},
        "value": None, "result": None, "warnings": []}
    return ServerSentEvent(data=valid_text(json.dumps(payload, ensure_ascii=False)), event="end")


async def event_stream(store: RunStore, run_id: str, *, after: int = 0,
                       poll_s: float = POLL_S,
                       with_result: bool = True) -> AsyncIterator[ServerSentEvent]:
    """The messages of the stream of ``run_id`` from event ``after`` on (the run exists). A
    run whose record or events cannot be read ends the stream as ``broken``, saying why."""
    try:
        async for message in _stream(store, run_id, after=after, poll_s=poll_s,
                                     with_result=with_result):
            yield message
    except RunStoreError as exc:
        yield _broken(exc.reason)


async def _stream(store: RunStore, run_id: str, *, after: int, poll_s: float,
                  with_result: bool) -> AsyncIterator[ServerSentEvent]:
    last = after
    while True:
        # Read the status before the events: a run's events are committed before its end, so
        # once a status other than running is seen, one more read finds every event.
        record = await store.get_run(run_id)
        while True:
            events = await store.events(run_id, after=last, limit=BATCH)
            if not events:
                break
            last = events[-1].seq
            yield _message(events)
            if len(events) < BATCH:
                break
        if record is None or record.status != "running":
            if record is not None:
                end = await anyio.to_thread.run_sync(
                    functools.partial(_end_message, record, with_result))
                yield ServerSentEvent(data=end, event="end")
            return
        await anyio.sleep(poll_s)

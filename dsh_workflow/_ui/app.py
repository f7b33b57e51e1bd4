"""The viewer's ASGI application (Starlette): pages, the live stream and local assets.

Routes:

- ``GET /`` — the run list, newest first; ``?status=`` and ``?name=`` (case-insensitive
  substring of the meta name) filter it. ``GET /runs-table`` is the same rows as an HTML
  fragment, which the list page fetches to refresh itself while runs are going. The counts so
  far of unfinished runs are kept between requests and read incrementally, a bounded number of
  events per request (:mod:`.counts`).
- ``GET /runs/{id}`` — a run page (404 for an unknown run). A run whose stored row cannot be
  read is listed as ``broken`` with what is wrong, and its page says so. Its result, args,
  script and meta are folded past :data:`~.summary.SHOWN_CHARS` characters, and made off the
  event loop.
- ``GET /api/runs/{id}/text/{part}?offset=N`` — the whole text of a run's ``value``,
  ``result``, ``args``, ``script`` or ``meta`` from character ``N`` on, at most
  :data:`~.summary.CHUNK_CHARS` characters (plain text; ``X-Total-Chars`` gives the whole
  length): the page's "show more" of a folded block. 404 for a run or part that has none.
- ``GET /api/runs/{id}/stream`` — the run's events and end as server-sent events (:mod:`.live`);
  ``after`` (or ``Last-Event-ID``) must be a whole number in SQLite's integer range, else 400;
  ``result=0`` leaves the result out of the end message (the page shows it already).
- ``GET /api/runs/{id}/calls/{seq}`` (and ``.../texts/{name}``) — one agent() call's request
  and answer, bounded per request (:mod:`.calls`).
- ``POST /api/runs/{id}/cancel`` — the run page's Cancel button (:mod:`.control`).
- ``POST /api/runs/{id}/questions/{qid}`` — the run page's answer to an open question
  (:mod:`.questions`); the page of a running or waiting run lists its open questions.
- ``GET /static/...`` — the viewer's own script and style; ``/static/highlight.css`` the
  syntax-highlighting style; ``/static/vendor/`` the pinned Chart.js file and its licence
  (vendored from the npm package by ``scripts/vendor_chartjs.py``). Nothing is fetched from
  the network.

The store is opened when the application starts and closed when it stops; the viewer only
reads it, except for the cancel requests of the Cancel button and the answers of the
questions' forms. Requests must name the host
``127.0.0.1`` or ``localhost`` (others get 400), and carry the viewer's token (:mod:`.auth`:
cookie, bearer header or ``?token=``, exchanged for the cookie); others get 401 and read
nothing. A request that may change state must also come from the viewer's own origin (else
403) — every route, present and future, is behind that check.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import AsyncIterator
from importlib import resources
from typing import Any, cast, get_args

import anyio
from markupsafe import Markup
from sse_starlette import EventSourceResponse
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from .._store import RunRecord, RunStatus, RunStoreError, SQLiteRunStore
from .._text import valid_text
from .auth import ViewerGuard
from .calls import call_routes
from .control import cancel_routes
from .counts import SoFar
from .live import event_stream
from .questions import open_questions, question_routes
from .summary import (
    CHUNK_CHARS,
    PARTS,
    RunRow,
    error_view,
    format_duration,
    format_time,
    highlight_css,
    part_text,
    result_warnings,
    run_name,
    run_row,
    show_js,
    show_json,
    text_chunk,
)
from .tree import first_paint

__all__ = ["create_app"]

_HERE = resources.files(__package__)
STATUSES: tuple[str, ...] = get_args(RunStatus)
_TEMPLATES = Jinja2Templates(directory=str(_HERE / "templates"))
_TEMPLATES.env.globals.update(format_time=format_time, format_duration=format_duration)


def _valid_output(value: Any) -> Any:
    """Every ``{{ ... }}`` of a page: a stored text UTF-8 cannot hold shows U+FFFD (a page is
    UTF-8; a lone surrogate would fail the whole response)."""
    if isinstance(value, Markup):
        return Markup(valid_text(value))
    return valid_text(value) if isinstance(value, str) else value


_TEMPLATES.env.finalize = _valid_output
#: The largest ``after`` / ``offset``: SQLite's integer range.
MAX_INTEGER = 2**63 - 1
_WHOLE = re.compile(r"-?[0-9]{1,20}")


def _whole_number(text: str, name: str) -> int:
    """``text`` as a whole number in 0..MAX_INTEGER (a negative one counts as 0); anything
    else is a 400 naming ``name``."""
    if not _WHOLE.fullmatch(text.strip()):
        raise HTTPException(400, f"{name} must be a whole number")
    value = int(text)
    if value > MAX_INTEGER:
        raise HTTPException(400, f"{name} must be at most {MAX_INTEGER}")
    return max(value, 0)


def _page_context(record: RunRecord) -> dict[str, Any]:
    """What the run page shows of ``record`` (CPU work on big values: run in a thread)."""
    result = record.result
    return {
        "run": record, "row": run_row(record), "name": run_name(record),
        "error": error_view(record), "meta": show_json(record.meta),
        "script": show_js(record.script), "args": show_json(record.args),
        "value": None if result is None else show_json(result.get("value")),
        "result": None if result is None else show_json(result),
    }


def create_app(store_path: str, *, token: str, port: int) -> Starlette:
    """The viewer of the run store file ``store_path``, served on 127.0.0.1:``port`` to holders
    of ``token`` (see :class:`.auth.ViewerGuard`)."""
    store = SQLiteRunStore(store_path)
    so_far = SoFar(store)
    texts: dict[tuple[str, str], str] = {}  # the last whole texts asked for, of ended runs

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with store:
            yield

    async def _runs(request: Request) -> tuple[list[RunRecord], str | None, str]:
        status = request.query_params.get("status") or None
        if status is not None and status not in STATUSES:
            raise HTTPException(400, f"unknown status {status!r}")
        name = (request.query_params.get("name") or "").strip()
        records = await store.list_runs(status=cast(RunStatus | None, status))
        if name:
            records = [r for r in records if name.casefold() in run_name(r).casefold()]
        return records, status, name

    async def _rows(records: list[RunRecord]) -> list[RunRow]:
        now = time.time()
        counted = await so_far.counts(records)  # totals come only at the end
        return [run_row(record, now=now, so_far=counted.get(record.id)) for record in records]

    async def run_list(request: Request) -> Response:
        records, status, name = await _runs(request)
        return _TEMPLATES.TemplateResponse(request, "list.html", {
            "rows": await _rows(records), "status": status or "", "name": name,
            "statuses": STATUSES, "store": store.path})

    async def runs_table(request: Request) -> Response:
        records, _, _ = await _runs(request)
        return _TEMPLATES.TemplateResponse(request, "rows.html",
                                           {"rows": await _rows(records)})

    async def run_page(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        try:
            record = await store.get_run(run_id)
        except RunStoreError as exc:  # a broken row: the page says what is wrong with it
            return _TEMPLATES.TemplateResponse(request, "broken.html",
                                               {"run_id": run_id, "problem": exc.reason})
        if record is None:
            raise HTTPException(404, f"no run {run_id!r} in this store")
        try:
            painted = await first_paint(store, record)
        except RunStoreError as exc:  # its events or calls cannot be read: say what is wrong
            return _TEMPLATES.TemplateResponse(request, "broken.html",
                                               {"run_id": run_id, "problem": exc.reason})
        context = await anyio.to_thread.run_sync(_page_context, record)
        context["warnings"] = result_warnings(record)
        try:
            context["questions"] = await open_questions(store, run_id, record.status)
        except RunStoreError as exc:
            return _TEMPLATES.TemplateResponse(request, "broken.html",
                                               {"run_id": run_id, "problem": exc.reason})
        context["answered"] = request.query_params.get("answered") or ""
        context.update(painted)
        return _TEMPLATES.TemplateResponse(request, "run.html", context)

    async def run_text(request: Request) -> Response:
        run_id, part = request.path_params["run_id"], request.path_params["part"]
        if part not in PARTS:
            raise HTTPException(404, f"no part {part!r} (one of {', '.join(PARTS)})")
        offset = _whole_number(request.query_params.get("offset") or "0", "offset")
        text = texts.get((run_id, part))
        if text is None:
            try:
                record = await store.get_run(run_id)
            except RunStoreError as exc:  # a broken row: its page says what is wrong
                raise HTTPException(409, exc.reason) from None
            if record is None:
                raise HTTPException(404, f"no run {run_id!r} in this store")
            text = await anyio.to_thread.run_sync(part_text, record, part)
            if text is None:
                raise HTTPException(404, f"the run {run_id!r} has no {part} yet")
            if record.status not in ("running", "interrupted"):  # it will not change
                texts.clear()  # keep one: bounded memory
                texts[(run_id, part)] = text
        chunk = valid_text(text_chunk(text, offset, CHUNK_CHARS))
        return Response(chunk, media_type="text/plain; charset=utf-8",
                        headers={"X-Total-Chars": str(len(text)),
                                 "X-Next-Offset": str(min(offset, len(text)) + len(chunk))})

    async def stream(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        try:
            found = await store.get_run(run_id)
        except RunStoreError as exc:
            raise HTTPException(409, exc.reason) from None
        if found is None:
            raise HTTPException(404, f"no run {run_id!r} in this store")
        after = request.headers.get("last-event-id") or request.query_params.get("after") or "0"
        start = _whole_number(after, "after")
        with_result = request.query_params.get("result") != "0"
        return EventSourceResponse(event_stream(store, run_id, after=start,
                                                with_result=with_result), ping=15)

    async def highlight_style(request: Request) -> Response:
        return Response(highlight_css(), media_type="text/css")

    async def no_icon(request: Request) -> Response:
        return Response(status_code=204)

    routes = [
        Route("/", run_list),
        Route("/runs-table", runs_table),
        Route("/runs/{run_id}", run_page),
        Route("/api/runs/{run_id}/stream", stream),
        Route("/api/runs/{run_id}/text/{part}", run_text),
        Route("/static/highlight.css", highlight_style),
        Route("/favicon.ico", no_icon),
        *call_routes(store),
        *cancel_routes(store),
        *question_routes(store),
        Mount("/static", StaticFiles(directory=os.fspath(str(_HERE / "static"))), name="static"),
    ]
    # Only requests addressed to this machine by name: a web page elsewhere cannot reach the
    # viewer by pointing its own host name at 127.0.0.1 (DNS rebinding).
    # Then only holders of the token, and state changes only from the viewer's own pages.
    middleware = [Middleware(TrustedHostMiddleware, allowed_hosts=["127.0.0.1", "localhost"]),
                  Middleware(ViewerGuard, token=token, port=port)]
    return Starlette(routes=routes, middleware=middleware, lifespan=lifespan)

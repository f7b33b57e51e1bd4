"""The viewer's ASGI application (Starlette): pages, the live stream and local assets.

Routes:

- ``GET /`` — the run list, newest first; ``?status=`` and ``?name=`` (case-insensitive
  substring of the meta name) filter it. ``GET /runs-table`` is the same rows as an HTML
  fragment, which the list page fetches to refresh itself while runs are going.
- ``GET /runs/{id}`` — a run page (404 for an unknown run). A run whose stored row cannot be
  read is listed as ``broken`` with what is wrong, and its page says so.
- ``GET /api/runs/{id}/stream`` — the run's events and end as server-sent events (:mod:`.live`).
- ``GET /api/runs/{id}/calls/{seq}`` (and ``.../texts/{name}``) — one agent() call's request
  and answer, bounded per request (:mod:`.calls`).
- ``POST /api/runs/{id}/cancel`` — the run page's Cancel button (:mod:`.control`).
- ``GET /static/...`` — the viewer's own script and style; ``/static/highlight.css`` the
  syntax-highlighting style; ``/static/vendor/`` the pinned Chart.js file and its licence
  (vendored from the npm package by ``scripts/vendor_chartjs.py``). Nothing is fetched from
  the network.

The store is opened when the application starts and closed when it stops; the viewer only
reads it, except for the cancel requests of the Cancel button. Requests must name the host
``127.0.0.1`` or ``localhost`` (others get 400), and carry the viewer's token (:mod:`.auth`:
cookie, bearer header or ``?token=``, exchanged for the cookie); others get 401 and read
nothing. A request that may change state must also come from the viewer's own origin (else
403) — every route, present and future, is behind that check.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import AsyncIterator
from importlib import resources
from typing import Any, cast, get_args

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
from .auth import ViewerGuard
from .calls import call_routes
from .control import cancel_routes
from .live import event_stream
from .summary import (
    RunRow,
    count_events,
    error_view,
    format_duration,
    format_time,
    highlight_css,
    highlight_js,
    highlight_json,
    result_warnings,
    run_name,
    run_row,
)
from .tree import first_paint

__all__ = ["create_app"]

_HERE = resources.files(__package__)
STATUSES: tuple[str, ...] = get_args(RunStatus)
_TEMPLATES = Jinja2Templates(directory=str(_HERE / "templates"))
_TEMPLATES.env.globals.update(format_time=format_time, format_duration=format_duration)


def create_app(store_path: str, *, token: str, port: int) -> Starlette:
    """The viewer of the run store file ``store_path``, served on 127.0.0.1:``port`` to holders
    of ``token`` (see :class:`.auth.ViewerGuard`)."""
    store = SQLiteRunStore(store_path)

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
        rows = []
        for record in records:
            so_far = None
            if record.status in ("running", "interrupted"):  # totals come only at the end
                try:
                    so_far = count_events(await store.events(record.id))
                except RunStoreError:
                    pass  # its events cannot be read: its page says why; the list goes on
            rows.append(run_row(record, now=now, so_far=so_far))
        return rows

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
        result = record.result
        context: dict[str, Any] = {
            "run": record, "row": run_row(record), "name": run_name(record),
            "error": error_view(record), "meta_html": highlight_json(record.meta),
            "script_html": highlight_js(record.script), "args_html": highlight_json(record.args),
            "result_html": None if result is None else highlight_json(result.get("value")),
            "result_full_html": None if result is None else highlight_json(result),
            "warnings": result_warnings(record),
        }
        try:
            context.update(await first_paint(store, record))
        except RunStoreError as exc:  # its events cannot be read: say so instead of a 500
            return _TEMPLATES.TemplateResponse(request, "broken.html",
                                               {"run_id": run_id, "problem": exc.reason})
        return _TEMPLATES.TemplateResponse(request, "run.html", context)

    async def stream(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        try:
            found = await store.get_run(run_id)
        except RunStoreError as exc:
            raise HTTPException(409, exc.reason) from None
        if found is None:
            raise HTTPException(404, f"no run {run_id!r} in this store")
        after = request.headers.get("last-event-id") or request.query_params.get("after") or "0"
        try:
            start = max(int(after), 0)
        except ValueError:
            raise HTTPException(400, "after must be a whole number") from None
        return EventSourceResponse(event_stream(store, run_id, after=start), ping=15)

    async def highlight_style(request: Request) -> Response:
        return Response(highlight_css(), media_type="text/css")

    async def no_icon(request: Request) -> Response:
        return Response(status_code=204)

    routes = [
        Route("/", run_list),
        Route("/runs-table", runs_table),
        Route("/runs/{run_id}", run_page),
        Route("/api/runs/{run_id}/stream", stream),
        Route("/static/highlight.css", highlight_style),
        Route("/favicon.ico", no_icon),
        *call_routes(store),
        *cancel_routes(store),
        Mount("/static", StaticFiles(directory=os.fspath(str(_HERE / "static"))), name="static"),
    ]
    # Only requests addressed to this machine by name: a web page elsewhere cannot reach the
    # viewer by pointing its own host name at 127.0.0.1 (DNS rebinding).
    # Then only holders of the token, and state changes only from the viewer's own pages.
    middleware = [Middleware(TrustedHostMiddleware, allowed_hosts=["127.0.0.1", "localhost"]),
                  Middleware(ViewerGuard, token=token, port=port)]
    return Starlette(routes=routes, middleware=middleware, lifespan=lifespan)

"""The viewer's Cancel button: ``POST /api/runs/{id}/cancel`` (docs/durable-runs.md, "Runs under control").

It asks the process that runs the run to cancel it, as ``dsh-workflow cancel`` does (the
store's ``cancel_requested`` mark, which that process polls for): ``202`` with
``{"requested": true}`` once the request is recorded, ``409`` with ``{"requested": false,
"status"}`` when the run is not running, ``404`` for an unknown run. The run page then sees
the run end through its event stream.

Like every request, it passes the viewer's guard first (:mod:`.auth`): the token, and — for a
state-changing request such as this one — an ``Origin`` that is the viewer's own (else 403).
"""

from __future__ import annotations

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .._store import RunStoreError, SQLiteRunStore

__all__ = ["VIEWER_ORIGIN", "cancel_routes"]

#: The origin a cancel request from the viewer names (the run ends ``cancelled from the viewer``).
VIEWER_ORIGIN = "viewer"


def cancel_routes(store: SQLiteRunStore) -> list[Route]:
    """The cancel route over ``store``."""

    async def cancel(request: Request) -> Response:
        run_id = request.path_params["run_id"]
        record = await store.get_run(run_id)
        if record is None:
            raise HTTPException(404, f"no run {run_id!r} in this store")
        try:
            requested = await store.request_cancel(run_id, origin=VIEWER_ORIGIN)
        except RunStoreError as exc:
            return JSONResponse({"requested": False, "error": str(exc)}, status_code=503)
        if not requested:
            again = await store.get_run(run_id)
            status = again.status if again is not None else record.status
            return JSONResponse({"requested": False, "status": status}, status_code=409)
        return JSONResponse({"requested": True, "status": "running"}, status_code=202)

    return [Route("/api/runs/{run_id}/cancel", cancel, methods=["POST"])]

"""The viewer's agent detail: what one ``agent()`` call was asked and answered, as bounded JSON.

Routes (added to the application by :func:`call_routes`):

- ``GET /api/runs/{id}/calls/{seq}`` — the call: ``seq``, ``label``, ``phase``, ``outcome``
  (None while it runs), ``replayed``, ``model`` (the model it ran on), ``options`` (agent type,
  effort, isolation, route, output-token limit), ``started_at``, ``ended_at``, ``usage``,
  ``failure`` and ``texts`` (an unended call of a run that is no longer running reads
  ``interrupted``): for each long text it has (``prompt``, ``system_prompt``,
  ``schema``, ``text``, ``structured``) its first :data:`DETAIL_CHARS` characters
  (``{"text", "total", "next"}``; ``next`` is the offset to load more from, None when all of
  it was sent). 404 for an unknown run or call, 400 for a seq that is not a whole number.
- ``GET /api/runs/{id}/calls/{seq}/texts/{name}?offset=N`` — the next at most
  :data:`DETAIL_CHARS` characters of one of those texts (``{"text", "offset", "total",
  "next"}``). 400 for an unknown name or a malformed offset.

So no request sends more than a bounded amount, however long a prompt or an answer is.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from .._store import CallRecord, SQLiteRunStore
from .._text import valid_data

__all__ = ["DETAIL_CHARS", "TEXT_NAMES", "call_payload", "call_routes", "text_chunk"]

DETAIL_CHARS = 8000
TEXT_NAMES = ("prompt", "system_prompt", "schema", "text", "structured")


def _texts(call: CallRecord) -> dict[str, str]:
    texts: dict[str, str] = {"prompt": call.prompt}
    if call.system_prompt:
        texts["system_prompt"] = call.system_prompt
    schema = call.options.get("schema")
    if schema is not None:
        texts["schema"] = json.dumps(schema, indent=2, ensure_ascii=False)
    if call.text is not None:
        texts["text"] = call.text
    if call.structured is not None:
        texts["structured"] = json.dumps(call.structured, indent=2, ensure_ascii=False)
    return texts


def text_chunk(text: str, offset: int = 0) -> dict[str, Any]:
    """At most :data:`DETAIL_CHARS` characters of ``text`` from ``offset``."""
    end = min(len(text), offset + DETAIL_CHARS)
    return {"text": text[offset:end], "offset": offset, "total": len(text),
            "next": end if end < len(text) else None}


def _bounded(value: Any, limit: int = 2000) -> Any:
    """A small JSON value as is; a large one cut to its first ``limit`` characters of JSON."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return value if len(text) <= limit else text[:limit] + "…"


def call_payload(call: CallRecord) -> dict[str, Any]:
    """The detail of ``call`` (see the module docstring)."""
    options = {key: call.options[key] for key in
               ("agent_type", "effort", "isolation", "route", "max_output_tokens", "model")
               if call.options.get(key) is not None}
    return {
        "seq": call.seq, "label": call.label, "phase": call.phase, "outcome": call.outcome,
        "replayed": call.replayed, "model": call.model, "options": _bounded(options),
        "started_at": call.started_at, "ended_at": call.ended_at,
        "usage": None if call.usage is None else call.usage.model_dump(mode="json"),
        "failure": None if call.failure is None else _bounded(call.failure, 4000),
        "texts": {name: text_chunk(text) for name, text in _texts(call).items()},
    }


def _seq(request: Request) -> int:
    try:
        seq = int(request.path_params["seq"])
    except ValueError:
        raise HTTPException(400, "the call's seq must be a whole number") from None
    if seq < 1:
        raise HTTPException(400, "the call's seq must be at least 1")
    return seq


def call_routes(store: SQLiteRunStore) -> list[Route]:
    """The detail routes over ``store``."""

    async def _call(request: Request) -> tuple[CallRecord, str]:
        run_id = request.path_params["run_id"]
        seq = _seq(request)
        record = await store.get_run(run_id)
        if record is None:
            raise HTTPException(404, f"no run {run_id!r} in this store")
        call = await store.call(run_id, seq)
        if call is None:
            raise HTTPException(404, f"no record of agent() call {seq} of this run")
        return call, record.status

    async def detail(request: Request) -> Response:
        call, status = await _call(request)
        payload = call_payload(call)
        if payload["outcome"] is None and status != "running":
            payload["outcome"] = "interrupted"  # its run ended without the call's end
        return JSONResponse(valid_data(payload, "agent")[0])

    async def more(request: Request) -> Response:
        name = request.path_params["name"]
        if name not in TEXT_NAMES:
            raise HTTPException(400, f"unknown text {name!r} (one of {', '.join(TEXT_NAMES)})")
        try:
            offset = int(request.query_params.get("offset", "0"))
        except ValueError:
            raise HTTPException(400, "offset must be a whole number") from None
        if offset < 0:
            raise HTTPException(400, "offset must not be negative")
        text = _texts((await _call(request))[0]).get(name)
        if text is None:
            raise HTTPException(404, f"this call has no {name}")
        return JSONResponse(valid_data(text_chunk(text, min(offset, len(text))), name)[0])

    return [Route("/api/runs/{run_id}/calls/{seq}", detail),
            Route("/api/runs/{run_id}/calls/{seq}/texts/{name}", more)]

"""The viewer's questions: a run's open questions on its page, each with a form, and the answer
route ``POST /api/runs/{id}/questions/{qid}`` (docs/viewer.md, "Answering questions").

- **Shown.** A running or waiting run's page lists its open questions (server-rendered, from
  the store): the text, details, deadline, and a form made for the question's kind —
  Approve/Reject for a checkpoint, one radio button per choice (check boxes when
  ``multiple``), a text box for a plain question, a JSON box (with the schema shown) otherwise.
- **Answered.** The form posts ``application/x-www-form-urlencoded`` fields (UTF-8) (``decision``:
  ``approve``/``reject``; ``choice``, repeated; ``text``; ``json``); a script may post
  ``application/json`` ``{"value": ...}`` instead. The value is checked by the one check every
  answerer shares (:func:`~dsh_workflow._questions.check_answer`, again inside the store's
  write) and recorded with ``by="viewer"``. The process running the run picks it up within
  half a second (its control poll); a parked run (status ``waiting``) keeps it for
  ``dsh-workflow answer``/``resume`` to continue with.
- **Replies.** A form post that was recorded is sent back to the run page (``303``); a JSON
  post gets ``200`` ``{"answered": true, "qid", "status"}``. Refused, nothing is written and
  the question stays open: ``400`` with the reason for a value that does not answer the
  question (plain text for a form, ``{"answered": false, "error"}`` for JSON), ``404`` for an
  unknown run or question, ``409`` for a question already answered or a run that no longer
  waits on it.
- Like every request, the post passes the viewer's guard first (:mod:`.auth`): the token, and
  an ``Origin`` that is the viewer's own (else ``403``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route

from .._errors import WorkflowError
from .._questions import Question, check_answer
from .._store import RunStoreError, SQLiteRunStore

__all__ = ["ANSWERABLE", "QuestionView", "form_value", "open_questions", "question_routes"]

#: The statuses of runs whose questions the viewer answers: the running process polls for the
#: answer; a parked run keeps it for its continuation.
ANSWERABLE = ("running", "waiting")
_BODY_LIMIT = 1_000_000  # bytes of a posted answer


@dataclass(frozen=True, slots=True)
class QuestionView:
    """What the run page shows of one open question: ``form`` is ``checkpoint``, ``choice``,
    ``choices`` (several), ``text`` or ``json``; ``schema`` the schema as indented JSON (for
    ``json``); ``default`` the default as JSON text, if any."""

    question: Question
    form: str
    schema: str | None
    default: str | None
    deadline: str | None


def _form(question: Question) -> str:
    if question.kind == "checkpoint":
        return "checkpoint"
    if question.choices is not None:
        return "choices" if question.multiple else "choice"
    if question.schema in (None, {"type": "string"}):
        return "text"
    return "json"


def question_view(question: Question) -> QuestionView:
    """The page's view of ``question``."""
    form = _form(question)
    deadline = None if question.deadline is None else \
        question.deadline.astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")
    return QuestionView(
        question=question, form=form,
        schema=json.dumps(question.schema, indent=2, ensure_ascii=False) if form == "json"
        else None,
        default=json.dumps(question.default, ensure_ascii=False) if question.has_default
        and question.kind == "ask" else None,
        deadline=deadline)


async def open_questions(store: SQLiteRunStore, run_id: str, status: str) -> list[QuestionView]:
    """The open questions of the run (none unless its status is in :data:`ANSWERABLE`), in ask
    order. Raises :class:`RunStoreError` when they cannot be read."""
    if status not in ANSWERABLE:
        return []
    return [question_view(q) for q in await store.questions(run_id, open_only=True)]


def form_value(question: Question, form: Mapping[str, list[str]]) -> Any:
    """The answer a posted form (its fields, each with its values in order) gives ``question``
    (before :func:`check_answer`); raises ``ValueError`` saying what the form lacks."""
    kind = _form(question)
    if kind == "checkpoint":
        decision = _one(form, "decision")
        if decision not in ("approve", "reject"):
            raise ValueError("a checkpoint is answered with decision=approve or decision=reject")
        return decision == "approve"
    if kind in ("choice", "choices"):
        picked = form.get("choice", [])
        if kind == "choice":
            if len(picked) != 1:
                raise ValueError("pick one of the choices")
            return picked[0]
        return picked
    if kind == "text":
        text = _one(form, "text")
        if text is None or not text.strip():
            raise ValueError("type an answer")
        return text.replace("\r\n", "\n")
    raw = _one(form, "json")
    if raw is None or not raw.strip():
        raise ValueError("type the answer as JSON")
    try:
        return json.loads(raw)
    except ValueError as exc:
        raise ValueError(f"the answer is not valid JSON: {exc}") from None


def _one(form: Mapping[str, list[str]], name: str) -> str | None:
    values = form.get(name)
    return values[0] if values and len(values) == 1 else None


def question_routes(store: SQLiteRunStore) -> list[Route]:
    """The answer route over ``store``."""

    async def answer(request: Request) -> Response:
        run_id, qid = request.path_params["run_id"], request.path_params["qid"]
        as_json = request.headers.get("content-type", "").startswith("application/json")

        def refused(status: int, why: str) -> Response:
            if as_json:
                return JSONResponse({"answered": False, "error": why}, status_code=status)
            return PlainTextResponse(f"Not answered: {why}\n", status_code=status)

        try:
            record = await store.get_run(run_id)
        except RunStoreError as exc:
            return refused(409, exc.reason)
        if record is None:
            raise HTTPException(404, f"no run {run_id!r} in this store")
        try:
            asked = {r.question.qid: r for r in await store.question_records(run_id)}
        except RunStoreError as exc:
            return refused(503, str(exc))
        found = asked.get(qid)
        if found is None:
            raise HTTPException(404, f"run {run_id!r} has no question {qid!r}")
        if found.answered:
            return refused(409, f"question {qid} is already answered (by {found.by})")
        if record.status not in ANSWERABLE:
            return refused(409, f"the run is {record.status}: it no longer waits on {qid}")
        body = await request.body()
        if len(body) > _BODY_LIMIT:
            return refused(413, f"an answer is at most {_BODY_LIMIT} bytes")
        try:
            if as_json:
                posted = json.loads(body)
                if not isinstance(posted, dict) or "value" not in posted:
                    raise ValueError('post {"value": ...}')
                value = posted["value"]
            else:
                value = form_value(found.question, parse_qs(
                    body.decode("utf-8"), keep_blank_values=True, max_num_fields=1_000))
            value = check_answer(found.question, value)
            await store.answer_question(run_id, qid, value, by="viewer")
        except ValueError as exc:  # UnicodeDecodeError too
            return refused(400, str(exc))
        except WorkflowError as exc:
            return refused(409 if "already answered" in exc.message else 400, exc.message)
        except RunStoreError as exc:
            return refused(503, str(exc))
        if as_json:
            return JSONResponse({"answered": True, "qid": qid, "status": record.status})
        return RedirectResponse(f"/runs/{run_id}?answered={qid}#questions", status_code=303)

    return [Route("/api/runs/{run_id}/questions/{qid}", answer, methods=["POST"])]

"""Questions a run asks a person: ``ask()`` and ``checkpoint()`` in scripts (SPEC §25).

A question is one more journaled call: it costs no tokens, takes no agent slot and counts toward
no cap. This module holds the shapes that cross boundaries (the engine, the store, the CLI, the
viewer, MCP); the engine's behaviour lives with the host.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Generator
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any, Literal, Protocol, runtime_checkable

from ._errors import WorkflowError, WorkflowErrorCode

__all__ = ["ANSWERERS", "MAX_TIMEOUT_S", "AnswerProvider", "AnswerReceipt", "PendingQuestions",
           "Question", "QuestionKind", "WaitingReason", "answer_schema", "check_answer",
           "parse_timeout", "question_data", "question_from_data", "question_key"]

QuestionKind = Literal["ask", "checkpoint"]
"""``ask``: answered with a value (validated against its schema or choices); ``checkpoint``:
answered ``True`` (approved) or ``False`` (rejected)."""

WaitingReason = Literal["question", "limit"]
"""Why a parked run waits: open questions nobody was there to answer, or a provider's usage
limit (``WorkflowResult.resume_after`` says when it resets)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Question:
    """One open (or answered) question of a run.

    ``qid`` names it within its run and is stable across resumes of that run (a parked run's
    answer command names it). ``seq`` is the call's place in the run, as an agent's. ``schema``
    is the JSON Schema its answer is validated against (for a checkpoint: a boolean); ``choices``
    the strings an answer picks from (several when ``multiple``). ``deadline`` is absolute (an
    aware UTC datetime) or None when it never times out; ``has_default`` tells a ``default`` of
    ``None`` from none given.
    """

    qid: str
    seq: int
    kind: QuestionKind
    question: str
    schema: dict[str, Any] | None = None
    choices: tuple[str, ...] | None = None
    multiple: bool = False
    details: str | None = None
    default: Any = None
    has_default: bool = False
    deadline: datetime | None = None
    label: str | None = None
    phase: str | None = None


@runtime_checkable
class AnswerProvider(Protocol):
    """Answers a run's questions as they arise (``answers=`` of an engine).

    ``answer`` returns the value for the question (for a checkpoint, ``True`` or ``False``). An
    invalid value never reaches the script: the question stays open for another answerer (the
    viewer, ``WorkflowRun.answer``). Raising leaves the question open as well.

    A provider may name who it is with an ``answered_by`` attribute, one of :data:`ANSWERERS`
    (a terminal that asks inline: ``"terminal"``; an MCP client: ``"mcp"``); its answers'
    ``QuestionAnswered.by`` is then that name instead of ``"answers"``.
    """

    async def answer(self, question: Question) -> Any: ...


# ---- the rules every answerer shares ----------------------------------------------------------

#: Who answered a question (``QuestionAnswered.by``): the engine's caller (``run.answer()``), the
#: engine's ``answers=`` provider, the CLI's terminal, the viewer, an MCP client, the
#: ``dsh-workflow answer`` command, or the question's timeout.
ANSWERERS = ("caller", "answers", "terminal", "viewer", "mcp", "command", "timeout")

#: The longest a question may wait (``timeout``): a year.
MAX_TIMEOUT_S = 365 * 86_400.0

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3_600.0, "d": 86_400.0}
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h|d)?\s*$")


def parse_timeout(value: object) -> float:
    """A question's ``timeout`` in seconds: a positive number of seconds, or a text such as
    ``"90s"``, ``"30m"``, ``"24h"``, ``"7d"`` (a bare number in a text is seconds). Raises
    ``ValueError`` saying what is accepted; at most :data:`MAX_TIMEOUT_S`."""
    seconds: float | None = None
    if isinstance(value, bool):
        seconds = None
    elif isinstance(value, int | float):
        seconds = float(value)
    elif isinstance(value, str):
        found = _DURATION.match(value)
        if found is not None:
            seconds = float(found.group(1)) * _UNITS[found.group(2) or "s"]
    if seconds is None or not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"timeout must be a positive number of seconds or a duration such as "
                         f"\"30m\" or \"24h\" (got {value!r})")
    if seconds > MAX_TIMEOUT_S:
        raise ValueError(f"timeout must be at most a year (got {value!r})")
    return seconds


def question_key(question: Question) -> str:
    """The journal key of a question: hex SHA-256 over its kind, text, schema (canonical JSON),
    choices, ``multiple`` and details — never its label, phase, default or timeout. The n-th
    ask of a key in a resumed run takes the earlier run's n-th answer with that key."""
    material = json.dumps([question.kind, question.question, question.schema,
                           None if question.choices is None else list(question.choices),
                           question.multiple, question.details],
                          sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(material.encode("utf-8", "surrogatepass")).hexdigest()


def answer_schema(kind: QuestionKind, schema: dict[str, Any] | None,
                  choices: tuple[str, ...] | None, multiple: bool) -> dict[str, Any]:
    """The JSON Schema an answer is validated against: a checkpoint's is a boolean; a choice's
    one of ``choices`` (several, without repeats, when ``multiple``); a question with neither
    schema nor choices is answered with text."""
    if kind == "checkpoint":
        return {"type": "boolean"}
    if schema is not None:
        return schema
    if choices is not None:
        if multiple:
            return {"type": "array", "items": {"enum": list(choices)}, "uniqueItems": True}
        return {"enum": list(choices)}
    return {"type": "string"}


def check_answer(question: Question, value: Any) -> Any:
    """``value`` if it answers ``question`` (a checkpoint: ``True`` or ``False``; choices: one
    of them, or a list of distinct ones when ``multiple``; a schema: a JSON value that
    satisfies it; otherwise a string), else raises :class:`~dsh_workflow.WorkflowError` with
    code ``INVALID_ARGUMENT`` naming the question and what is wrong. The one check every
    answerer goes through (the engine, the store, the CLI, the viewer, MCP). Never changes
    the question."""
    def refuse(why: str) -> WorkflowError:
        return WorkflowError(WorkflowErrorCode.INVALID_ARGUMENT,
                             f"invalid answer to {question.qid} ({question.question!r}): {why}")

    if question.kind == "checkpoint":
        if not isinstance(value, bool):
            raise refuse(f"a checkpoint is answered with true (approve) or false (reject), not "
                         f"{_brief(value)}")
        return value
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError, RecursionError):
        raise refuse("the answer is not JSON data") from None
    if question.choices is not None:
        choices = question.choices
        if question.multiple:
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise refuse(f"pick a list of the choices {list(choices)!r}, not {_brief(value)}")
            wrong = [v for v in value if v not in choices]
            if wrong:
                raise refuse(f"{wrong[0]!r} is not one of the choices {list(choices)!r}")
            if len(set(value)) != len(value):
                raise refuse("a choice is picked more than once")
            return value
        if value not in choices or not isinstance(value, str):
            raise refuse(f"pick one of the choices {list(choices)!r}, not {_brief(value)}")
        return value
    schema = question.schema if question.schema is not None else {"type": "string"}
    if schema == {"type": "string"}:
        if not isinstance(value, str):
            raise refuse(f"the answer is text, not {_brief(value)}")
        return value
    from ._schema import value_violations  # jsonschema loads only for questions with schemas

    problems = value_violations(schema, value, pointers=True)
    if problems:
        raise refuse("; ".join(problems))
    return value


def _brief(value: object) -> str:
    text = json.dumps(value, ensure_ascii=False, default=repr)
    return text if len(text) <= 60 else text[:59] + "…"


def question_data(question: Question) -> dict[str, Any]:
    """``question`` as JSON data (its fields by name; the deadline as ISO 8601 text)."""
    data = {f.name: getattr(question, f.name) for f in fields(question)}
    data["choices"] = None if question.choices is None else list(question.choices)
    data["deadline"] = None if question.deadline is None else question.deadline.isoformat()
    return data


def question_from_data(data: dict[str, Any]) -> Question:
    """The :class:`Question` :func:`question_data` made (raises ``ValueError``/``TypeError`` on
    data it did not make)."""
    known = {f.name for f in fields(Question)}
    values = {k: v for k, v in data.items() if k in known}
    if values.get("choices") is not None:
        values["choices"] = tuple(values["choices"])
    deadline = values.get("deadline")
    if isinstance(deadline, str):
        values["deadline"] = datetime.fromisoformat(deadline)
    return Question(**values)


class PendingQuestions(list[Question]):
    """What ``WorkflowRun.pending()`` returns: the open questions, in ask order — a plain list,
    which may also be awaited (``await run.pending()`` gives the same list), so callers on
    either side of the async line use it alike."""

    def __await__(self) -> Generator[Any, None, PendingQuestions]:
        return _itself(self).__await__()


async def _itself(value: PendingQuestions) -> PendingQuestions:
    return value


class AnswerReceipt:
    """What ``WorkflowRun.answer()`` returns once the answer was accepted (it was valid and the
    question open): awaiting it waits until the answer is delivered — committed to the run
    store first when the run has one, then handed to the script — and returns the
    :class:`Question`; it raises the :class:`~dsh_workflow.WorkflowError` of a delivery that
    failed (another answerer was first; the run ended). Not awaiting it is fine: delivery
    goes on, and a failure is logged."""

    __slots__ = ("_done", "_error", "question")

    def __init__(self, question: Question) -> None:
        self.question = question
        self._done: Any = None  # an anyio.Event, made on the loop when first needed
        self._error: BaseException | None = None

    def _event(self) -> Any:
        if self._done is None:
            import anyio

            self._done = anyio.Event()
        return self._done

    def deliver(self, error: BaseException | None = None) -> None:
        """Called by the engine once delivery ended (``error``: why it failed)."""
        self._error = error
        self._event().set()

    def __await__(self) -> Generator[Any, None, Question]:
        return self._wait().__await__()

    async def _wait(self) -> Question:
        await self._event().wait()
        if self._error is not None:
            raise self._error
        return self.question

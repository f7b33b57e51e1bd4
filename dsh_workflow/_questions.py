"""Questions a run asks a person: ``ask()`` and ``checkpoint()`` in scripts (SPEC §25).

A question is one more journaled call: it costs no tokens, takes no agent slot and counts toward
no cap. This module holds the shapes that cross boundaries (the engine, the store, the CLI, the
viewer, MCP); the engine's behaviour lives with the host.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol, runtime_checkable

__all__ = ["AnswerProvider", "Question", "QuestionKind", "WaitingReason"]

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
    """

    async def answer(self, question: Question) -> Any: ...

"""``AutoAnswer``: an :class:`~dsh_workflow.AnswerProvider` for tests and CI."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any

from .._questions import Question

__all__ = ["AutoAnswer"]


class AutoAnswer:
    """Answers a run's questions without a person (``answers=AutoAnswer(...)`` of an engine).

    Given a mapping, a question is answered with the value under its text (``question.question``);
    given a callable, with what it returns for the :class:`~dsh_workflow.Question` (it may be a
    coroutine function). A question the mapping does not hold raises ``LookupError``, which
    leaves it open for another answerer (the run waits, or parks with ``park=True``); so does
    whatever a callable raises. An answer that does not fit the question never reaches the
    script (the engine checks it). ``asked`` lists the questions seen, in order.
    """

    def __init__(self, answers: Mapping[str, Any] | Callable[[Question], Any]) -> None:
        if not isinstance(answers, Mapping) and not callable(answers):
            raise TypeError("AutoAnswer takes a mapping from question text to value, or a "
                            "callable of the Question")
        self._answers = answers
        self.asked: list[Question] = []

    async def answer(self, question: Question) -> Any:
        self.asked.append(question)
        answers = self._answers
        if isinstance(answers, Mapping):
            if question.question not in answers:
                raise LookupError(f"AutoAnswer has no answer for {question.question!r}")
            return answers[question.question]
        value = answers(question)
        if inspect.isawaitable(value):
            value = await value
        return value

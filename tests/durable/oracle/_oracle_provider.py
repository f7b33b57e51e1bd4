"""The oracle's provider: answers that depend on the prompt alone, completions in a seeded
shuffled order, and a durable count of every call it was paid for.

:class:`ShuffledProvider` answers each child with :func:`answer_for` its prompt (so an
uninterrupted run and a resumed one get the same answers), after a pause drawn from its seed
(so children started together complete in an order the seed decides, differently in every
process); a prompt with `` fail `` in it always fails. Before it pauses it appends the call
to a *ledger* — a file outside the run store, written with ``os.write`` and ``os.fsync`` — so
a process killed after that moment has paid for the call, and the oracle can count what every
process paid (:func:`read_ledger`).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from collections import Counter
from typing import Any

import anyio

from dsh_workflow import Question, SubagentRequest, SubagentResult, Usage

__all__ = ["IDENTITY", "QUESTION", "Answerer", "ShuffledProvider", "answer_for",
           "question_answer", "read_ledger"]

#: Every process's provider has this identity, so a resume's keys match the crashed run's.
IDENTITY = "oracle-shuffled"

#: The pauses a child may get (seconds): many none, some long enough to be overtaken.
PAUSES = (0.0, 0.0, 0.0005, 0.002, 0.006, 0.015)


def answer_for(prompt: str, schema: Any) -> tuple[str | None, Any]:
    """The one answer to ``prompt``: ``(text, None)``, or ``(None, {"n", "w"})`` with a schema."""
    digest = hashlib.sha256(prompt.encode("utf-8", "surrogatepass")).hexdigest()
    if schema is None:
        return "a" + digest[:9], None
    return None, {"n": int(digest[:6], 16), "w": digest[6:12]}


#: How a question is written in the ledger: this mark, then its text (no prompt starts so).
QUESTION = "?"


def question_answer(question: Question) -> Any:
    """The one answer to a question, from its text: a boolean for a checkpoint, one of its
    choices, else a short text."""
    digest = hashlib.sha256(question.question.encode("utf-8", "surrogatepass")).hexdigest()
    if question.kind == "checkpoint":
        return int(digest[:2], 16) % 2 == 0
    if question.choices:
        return question.choices[int(digest[:4], 16) % len(question.choices)]
    return "q" + digest[:7]


class Answerer:
    """The person the oracle's runs ask (``answers=AutoAnswer(Answerer(...))``): answers by
    :func:`question_answer`, after appending the question to the ledger as a paid call is
    (:data:`QUESTION` + its text), so a question asked again after its answer was journaled
    is counted too."""

    def __init__(self, ledger: str, attempt: int) -> None:
        self._ledger = ledger
        self._attempt = attempt

    def __call__(self, question: Question) -> Any:
        record = json.dumps({"attempt": self._attempt, "prompt": QUESTION + question.question})
        fd = os.open(self._ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, (record + "\n").encode("utf-8", "surrogatepass"))
            os.fsync(fd)
        finally:
            os.close(fd)
        return question_answer(question)


class ShuffledProvider:
    """See the module docstring. ``attempt`` names the process in the ledger."""

    identity = IDENTITY

    def __init__(self, seed: int, ledger: str, attempt: int) -> None:
        self._rng = random.Random(seed)
        self._attempt = attempt
        self._fd = os.open(ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)

    def close(self) -> None:
        os.close(self._fd)

    async def run(self, request: SubagentRequest) -> SubagentResult:
        record = json.dumps({"attempt": self._attempt, "prompt": request.prompt})
        os.write(self._fd, (record + "\n").encode("utf-8", "surrogatepass"))
        os.fsync(self._fd)  # paid: on disk before the child does anything else
        pause = self._rng.choice(PAUSES)
        if pause:
            await anyio.sleep(pause)
        else:
            await anyio.lowlevel.checkpoint()
        if " fail " in request.prompt:
            return SubagentResult(stop_reason="error", error="this prompt always fails",
                                  usage=Usage(input_tokens=len(request.prompt), output_tokens=1))
        text, structured = answer_for(request.prompt, request.schema)
        return SubagentResult(stop_reason="completed", text=text, structured=structured,
                              usage=Usage(input_tokens=len(request.prompt), output_tokens=10))


def read_ledger(path: str) -> dict[int, Counter[str]]:
    """Every paid call, by attempt: ``{attempt: Counter(prompt → calls)}``. Each line was
    appended by one ``os.write`` (``O_APPEND``, a local file), so a line is whole or absent."""
    paid: dict[int, Counter[str]] = {}
    if not os.path.exists(path):
        return paid
    with open(path, encoding="utf-8", errors="surrogatepass") as handle:
        for line in handle:
            record = json.loads(line)
            paid.setdefault(record["attempt"], Counter())[record["prompt"]] += 1
    return paid

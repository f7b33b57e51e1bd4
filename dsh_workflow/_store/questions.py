"""A run's questions (``ask()``, ``checkpoint()``): the ``questions`` rows, and the SQL that
writes and reads them (schema version 5).

A question's row is written when it is asked (open) and updated once when it is answered; the
answer is validated by :func:`dsh_workflow._questions.check_answer` (the one check every
answerer shares) inside the write's transaction, so an invalid answer, or one for a question
already answered, changes nothing. A resumed run reads its earlier run's rows in seq order to
replay the answers and to keep the deadlines of the questions still open.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .._errors import WorkflowError, WorkflowErrorCode
from .._questions import Question, check_answer, question_data, question_from_data
from .encoding import dumps, loads

__all__ = ["QuestionRecord", "answer_row", "insert_question", "read_questions"]

_SELECT = ("SELECT qid, seq, key, question, asked_at, answered_at, answer, answered_by "
           "FROM questions")


@dataclass(frozen=True, slots=True)
class QuestionRecord:
    """One stored question of a run: the :class:`~dsh_workflow.Question`, its journal key,
    when it was asked, and — once answered — the answer, when and by whom (``by``:
    ``caller``, ``answers``, ``terminal``, ``viewer``, ``mcp``, ``command`` or ``timeout``).
    ``answered`` tells a ``None`` answer (a timeout's) from none."""

    question: Question
    key: str
    asked_at: float
    answered: bool = False
    answer: Any = None
    answered_at: float | None = None
    by: str | None = None


def insert_question(conn: sqlite3.Connection, run_id: str, question: Question, key: str,
                    asked_at: float) -> None:
    """Record ``question`` as asked (open); a question already recorded is left as it is."""
    deadline = None if question.deadline is None else question.deadline.timestamp()
    conn.execute("INSERT OR IGNORE INTO questions (run_id, qid, seq, key, question, asked_at, "
                 "deadline) VALUES (?, ?, ?, ?, ?, ?, ?)",
                 (run_id, question.qid, question.seq, key, dumps(question_data(question)),
                  asked_at, deadline))


def _record(row: tuple[Any, ...]) -> QuestionRecord:
    question = question_from_data(loads(row[3]))
    answered = row[5] is not None
    return QuestionRecord(question=question, key=row[2], asked_at=row[4], answered=answered,
                          answer=loads(row[6]) if answered and row[6] is not None else None,
                          answered_at=row[5], by=row[7])


def read_questions(conn: sqlite3.Connection, run_id: str, *,
                   open_only: bool = False) -> list[QuestionRecord]:
    """The run's questions in seq order (only the unanswered ones with ``open_only``)."""
    sql = _SELECT + " WHERE run_id = ?" + (" AND answered_at IS NULL" if open_only else "") \
        + " ORDER BY seq"
    return [_record(row) for row in conn.execute(sql, (run_id,))]


def answer_row(conn: sqlite3.Connection, run_id: str, qid: str, value: Any, *, by: str,
               validate: bool = True) -> Question:
    """Answer the open question ``qid`` of ``run_id`` with ``value`` (checked first unless
    ``validate`` is False: a timeout's own value); returns the question. Raises
    :class:`~dsh_workflow.WorkflowError` ``INVALID_ARGUMENT`` for an unknown or already
    answered ``qid`` or an invalid ``value``, changing nothing."""
    row = conn.execute(_SELECT + " WHERE run_id = ? AND qid = ?", (run_id, qid)).fetchone()
    if row is None:
        known = [r[0] for r in conn.execute(
            "SELECT qid FROM questions WHERE run_id = ? AND answered_at IS NULL ORDER BY seq",
            (run_id,))]
        raise WorkflowError(WorkflowErrorCode.INVALID_ARGUMENT, (
            f"run {run_id!r} has no question {qid!r} (open: "
            f"{', '.join(known) if known else 'none'})"))
    record = _record(row)
    if record.answered:
        raise WorkflowError(WorkflowErrorCode.INVALID_ARGUMENT, (
            f"question {qid} of run {run_id!r} is already answered (by {record.by})"))
    if validate:
        value = check_answer(record.question, value)
    conn.execute("UPDATE questions SET answered_at = ?, answer = ?, answered_by = ? "
                 "WHERE run_id = ? AND qid = ? AND answered_at IS NULL",
                 (time.time(), dumps(value), by, run_id, qid))
    return record.question


def deadline_of(seconds: float | None) -> datetime | None:
    """A stored deadline (POSIX seconds) as an aware UTC datetime."""
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC)

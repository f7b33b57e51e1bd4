"""What the command line says about a parked run (docs/durable-runs.md, "Runs that wait"): its
open questions with the command that answers each, or when its provider's limit resets.

Used by ``run``/``resume``/``answer`` when a run parks (exit 75) and by ``resume`` of a run
whose limit has not reset yet. Pure text: no store, no engine.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from datetime import UTC, datetime

from .._questions import Question
from .._store import RunRecord
from .stores import default_store_path

__all__ = ["answer_command", "limit_due", "limit_lines", "question_lines", "when_due"]


def answer_command(run_id: str, question: Question, store: str | None) -> str:
    """``dsh-workflow answer <id> <qid> --json VALUE`` (``--approve``/``--reject`` for a
    checkpoint), with ``--store PATH`` when the store is not the default one."""
    import os

    argv = ["dsh-workflow", "answer", run_id, question.qid]
    if store is not None and os.path.abspath(store) != default_store_path():
        argv += ["--store", store]
    text = shlex.join(argv)
    if question.kind == "checkpoint":
        return f"{text} --approve   (or --reject)"
    if question.choices is not None:
        example = [question.choices[0]] if question.multiple else question.choices[0]
        return f"{text} --json {shlex.quote(json.dumps(example, ensure_ascii=False))}"
    return f"{text} --json VALUE"


def question_lines(run_id: str, questions: Sequence[Question], store: str | None) -> list[str]:
    """One block per open question: its qid, kind and text, its choices or schema, its
    details and deadline, and the command that answers it."""
    lines = [f"run {run_id} is waiting for {len(questions)} answer"
             f"{'s' if len(questions) != 1 else ''}:"]
    for question in questions:
        lines.append(f"  {question.qid} ({question.kind}): {question.question}")
        if question.details:
            lines.append(f"      details: {question.details}")
        if question.choices is not None:
            many = " (pick one or more, as a JSON list)" if question.multiple else ""
            lines.append("      choices: " + ", ".join(question.choices) + many)
        elif question.kind == "ask" and question.schema not in (None, {"type": "string"}):
            lines.append("      answer as JSON matching: "
                         + json.dumps(question.schema, ensure_ascii=False))
        if question.deadline is not None:
            lines.append(f"      times out: {_clock(question.deadline)}")
        lines.append(f"      answer with: {answer_command(run_id, question, store)}")
    return lines


def when_due(resume_after: datetime | None, now: datetime | None = None) -> str:
    """When a limit resets, as a clock time and a duration (``at 2031-01-02 03:04 UTC, in
    2h 5m``); ``at an unknown time`` when the provider did not say."""
    if resume_after is None:
        return "at a time the provider did not say"
    left = (resume_after - (now or datetime.now(UTC))).total_seconds()
    return f"at {_clock(resume_after)}, {'in ' + _duration(left) if left > 0 else 'now'}"


def limit_lines(run_id: str, resume_after: datetime | None, resume: str) -> list[str]:
    """A limit park: when the limit resets and the command that continues the run."""
    return [f"run {run_id} is waiting for its provider's usage limit to reset "
            f"({when_due(resume_after)})",
            f"continue it then with: {resume}"]


def limit_due(record: RunRecord, store: str | None) -> list[str] | None:
    """For a run parked on a provider's limit that has not reset yet: what ``resume`` says
    (when it is due); None when it may be continued now."""
    result = record.result or {}
    if result.get("waiting_reason") != "limit" or not isinstance(result.get("resume_after"), str):
        return None
    try:
        resume_after = datetime.fromisoformat(result["resume_after"])
    except ValueError:
        return None
    if resume_after.tzinfo is None or resume_after <= datetime.now(UTC):
        return None
    from .stores import resume_command

    command = resume_command(record.id, store) if store is not None else \
        f"dsh-workflow resume {record.id}"
    return [f"run {record.id} waits for its provider's usage limit to reset "
            f"({when_due(resume_after)}); nothing was called",
            f"continue it then with: {command}"]


def _clock(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _duration(seconds: float) -> str:
    seconds = int(seconds + 0.999)
    days, rest = divmod(seconds, 86_400)
    hours, rest = divmod(rest, 3_600)
    minutes, secs = divmod(rest, 60)
    parts = [f"{days}d" if days else "", f"{hours}h" if hours else "",
             f"{minutes}m" if minutes else "", f"{secs}s" if secs and not days else ""]
    return " ".join(p for p in parts if p) or "0s"

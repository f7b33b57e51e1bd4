"""The CLI asks a run's questions on the terminal (SPEC §25; docs/cli.md, "Questions on a
terminal").

When ``run``, ``resume`` or ``answer`` have a person at the terminal (stdin and stdout are
terminals), :class:`TerminalAnswers` is the engine's ``answers=``: each question is asked
inline on stderr, one at a time, while the live progress panel is paused so that it cannot draw
over the prompt. Choices are a numbered list (several numbers when ``multiple``), a checkpoint
is y/n, a schema's answer is JSON typed on one line; a reply that does not answer the question
says why and asks again. Without a terminal there is no :class:`TerminalAnswers`, and the run
parks (docs/durable-runs.md, "Runs that wait").

The reply is read from the terminal's file descriptor on the event loop (never a thread), so a
run that ends while a question is on screen leaves nothing behind.
"""

from __future__ import annotations

import json
import os
import sys
from typing import IO, Any

import anyio

from dsh_workflow import WorkflowError
from dsh_workflow._questions import Question, check_answer
from dsh_workflow._text import escape_controls

from .progress import Progress

__all__ = ["TerminalAnswers", "TerminalClosed", "parse_reply", "prompt_text", "terminal_answers"]

_YES = ("y", "yes")
_NO = ("n", "no")


class TerminalClosed(LookupError):
    """The terminal's input ended: nobody answers there any more (the question stays open)."""


def _is_text(question: Question) -> bool:
    return question.kind == "ask" and question.choices is None \
        and question.schema in (None, {"type": "string"})


def prompt_text(question: Question) -> str:
    """What the terminal shows for ``question``: its text and details, the numbered choices,
    and the reply line's hint (ending with a space, the cursor after it). Control characters
    of the script's text are escaped."""
    lines = [f"? {escape_controls(question.question)}"]
    if question.details:
        lines += [f"  {escape_controls(line)}" for line in question.details.splitlines()]
    if question.kind == "checkpoint":
        hint = "[Y/n]" if question.default is True else "[y/N]"
    elif question.choices is not None:
        lines += [f"  {n}) {escape_controls(choice)}"
                  for n, choice in enumerate(question.choices, 1)]
        hint = ("numbers, separated by commas or spaces" if question.multiple else
                "a number")
    elif _is_text(question):
        hint = "text"
    else:
        hint = "JSON on one line; schema: " + json.dumps(question.schema, ensure_ascii=False)
    if question.has_default and question.kind == "ask":
        hint += "; empty for the default " + json.dumps(question.default, ensure_ascii=False)
    if question.kind == "checkpoint":
        return "\n".join(lines) + ("\n  " if len(lines) > 1 else " ") + hint + " "
    return "\n".join(lines) + f"\n  ({hint}) > "


def parse_reply(question: Question, line: str) -> Any:
    """The value a typed ``line`` means for ``question`` (before :func:`check_answer`): y/n
    for a checkpoint; a choice's number (or its exact text; a number shown wins over a choice
    whose text is a number) — several, separated by commas or spaces, when ``multiple``; the
    text itself for a plain question; else JSON. An empty line is the question's default when
    it has one. Raises ``ValueError`` saying what to type."""
    reply = line.strip()
    if not reply and question.has_default:
        return question.default
    if question.kind == "checkpoint":
        if reply.lower() in _YES:
            return True
        if reply.lower() in _NO:
            return False
        raise ValueError("type y (approve) or n (reject)")
    choices = question.choices
    if choices is not None:
        if not question.multiple:
            return _choice(choices, reply)
        parts = [p for p in reply.replace(",", " ").split() if p]
        if not parts:
            raise ValueError("type one or more numbers from the list")
        return [_choice(choices, part) for part in parts]
    if _is_text(question):
        if not reply:
            raise ValueError("type an answer")
        return line.rstrip("\r\n")
    try:
        return json.loads(reply)
    except ValueError:
        raise ValueError("type the answer as JSON on one line") from None


def _choice(choices: tuple[str, ...], part: str) -> str:
    # the number shown wins over a choice whose text is a number
    if part.isascii() and part.isdigit() and 1 <= int(part) <= len(choices):
        return choices[int(part) - 1]
    if part in choices:
        return part
    raise ValueError(f"type a number from 1 to {len(choices)}")


class TerminalAnswers:
    """An :class:`~dsh_workflow.AnswerProvider` that asks a person at the terminal: the
    prompt on ``out``, the reply a line read from the file descriptor ``fd``. Questions are
    asked one at a time (in the order they arise) with ``progress`` paused; a reply that is not
    an answer (:func:`parse_reply`, then :func:`check_answer`) names what is wrong and the
    question is asked again, so an invalid answer never leaves here. An end of input raises
    :class:`TerminalClosed`, which leaves the question (and every later one) open for another
    answerer (the run parks when there is none)."""

    #: Who answered, as the run records it (``QuestionAnswered.by``).
    answered_by = "terminal"

    def __init__(self, progress: Progress, *, fd: int, out: IO[str]) -> None:
        self._progress = progress
        self._fd = fd
        self._out = out
        self._lock = anyio.Lock()
        self._closed = False
        self._pending = b""

    async def answer(self, question: Question) -> Any:
        async with self._lock:
            if self._closed:
                raise TerminalClosed("the terminal's input is closed")
            with self._progress.paused():
                self._write("\n" + prompt_text(question))
                while True:
                    line = await self._read_line()
                    try:
                        return check_answer(question, parse_reply(question, line))
                    except ValueError as exc:
                        why = str(exc)
                    except WorkflowError as exc:
                        why = exc.message.partition("): ")[2] or exc.message
                    self._write(f"  {escape_controls(why)}; try again > ")

    def _write(self, text: str) -> None:
        self._out.write(text)
        self._out.flush()

    async def _read_line(self) -> str:
        while b"\n" not in self._pending:
            await anyio.wait_readable(self._fd)
            chunk = os.read(self._fd, 65_536)
            if not chunk:
                self._closed = True
                self._write("\n")
                raise TerminalClosed("the terminal's input is closed")
            self._pending += chunk
        line, _, self._pending = self._pending.partition(b"\n")
        return line.decode("utf-8", "replace")


def terminal_answers(progress: Progress) -> TerminalAnswers | None:
    """The terminal's answerer when a person is there (stdin and stdout are terminals), else
    None (the run parks instead)."""
    try:
        if not (sys.stdin.isatty() and sys.stdout.isatty()):
            return None
        fd = sys.stdin.fileno()
    except (AttributeError, OSError, ValueError):
        return None
    return TerminalAnswers(progress, fd=fd, out=sys.stderr)

"""The seam: the lifecycle contract every engine implements.

An engine is an async context manager that owns its task group. ``start()`` is synchronous:
it validates the request (raising :class:`WorkflowError` before any run or event exists) and
returns a :class:`WorkflowRun`. Leaving the engine's ``async with`` block cancels and disposes
every run still alive, so nothing a run started outlives the engine.
"""

from __future__ import annotations

import abc
from collections.abc import Awaitable, Callable
from types import TracebackType

from ._errors import WorkflowError, WorkflowErrorCode
from ._events import EventHub
from ._meta import WorkflowMeta
from ._questions import AnswerReceipt, PendingQuestions
from ._request import WorkflowStartRequest
from ._result import WorkflowResult

__all__ = ["WorkflowEngine", "WorkflowRun"]


class WorkflowRun(abc.ABC):
    """One started workflow.

    Guarantees, for every engine:

    * ``await result()`` never raises, may be awaited any number of times, and always yields
      the same :class:`WorkflowResult`.
    * ``cancel(reason)`` is synchronous and idempotent; the first reason wins; it is a no-op once
      the run has ended. After it, no hook of the script does anything but throw ``CANCELLED``,
      no queued child starts and in-flight children are cancelled; ``result()`` settles
      ``cancelled`` promptly even while script code is spinning.
    * ``await dispose()`` is idempotent, cancels what remains, and returns within the engine's
      ``dispose_grace_s``; afterwards no task, child or provider call of the run is alive, and
      the script's runtime is released (a runtime stuck in one CPU slice ends by itself within
      ``slice_cpu_limit_s``).
    """

    # No instance dictionary here, so a subclass with ``__slots__`` has none either.
    __slots__ = ()

    id: str
    meta: WorkflowMeta

    @abc.abstractmethod
    async def result(self) -> WorkflowResult:
        """Wait for the run's one result. Never raises (cancellation of the caller aside).

        On an engine with a run store, the run's end is committed to the store before this
        returns (bounded by ``dispose_grace_s``; a failing store is logged), so a process that
        acts on the result and then dies leaves the run ``completed``, not ``interrupted``."""

    @abc.abstractmethod
    def cancel(self, reason: str | None = None) -> None:
        """Request cancellation; see the class contract."""

    @abc.abstractmethod
    async def dispose(self) -> None:
        """Cancel if needed and release everything the run holds; see the class contract."""

    def pending(self) -> PendingQuestions:
        """The run's open questions (``ask()``, ``checkpoint()``), in ask order: a list that may
        also be awaited. A run that never asks (this default, for engines without questions)
        has none."""
        return PendingQuestions()

    def answer(self, qid: str, value: object) -> AnswerReceipt:
        """Answer the open question ``qid`` with ``value`` (a checkpoint: ``True`` or
        ``False``). Raises :class:`WorkflowError` ``INVALID_ARGUMENT`` at once — the question
        staying open — for an unknown or answered qid or an invalid value (the check of
        ``dsh_workflow._questions.check_answer``). Returns an :class:`AnswerReceipt`, which may
        be awaited until the answer is delivered (durable first on a run with a store). This
        default (a run without questions) knows no qid."""
        raise WorkflowError(WorkflowErrorCode.INVALID_ARGUMENT,
                            f"run {self.id!r} has no open question {qid!r}")


class WorkflowEngine(abc.ABC):
    """Runs workflows; see the module docstring for the lifecycle."""

    events: EventHub

    @abc.abstractmethod
    def start(self, request: WorkflowStartRequest) -> WorkflowRun:
        """Validate ``request`` and start it.

        Raises ``WorkflowError`` (``META_INVALID``, ``SCRIPT_PARSE``, ``INVALID_ARGUMENT``)
        before any run exists and before any event, and ``RuntimeError`` outside the engine's
        ``async with`` block. Emits ``WorkflowStarted`` before returning.
        """

    def start_soon(self, func: Callable[[], Awaitable[object]], *, name: str) -> bool:
        """Run ``func()`` as a task of the engine's own task group, so work that follows a
        run (such as delivering a background run's completion) lives exactly as long as the
        engine. Returns False, running nothing, when the engine cannot: outside its
        ``async with`` block, or an engine that does not offer it (this default). An
        exception ``func`` raises is logged and cancels nothing else; leaving the engine's
        block cancels the tasks still running."""
        return False

    @abc.abstractmethod
    async def __aenter__(self) -> WorkflowEngine: ...

    @abc.abstractmethod
    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> bool | None: ...

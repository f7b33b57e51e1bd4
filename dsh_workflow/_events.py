"""Run events: frozen payloads and the hub that delivers them to listeners."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict

from ._errors import WorkflowErrorCode
from ._failure import AgentFailure
from ._meta import WorkflowMeta
from ._questions import QuestionKind, WaitingReason
from ._result import StopReason
from ._subagent import ErrorKind, Usage

__all__ = [
    "AgentEnded",
    "AgentOutcome",
    "AgentReplayed",
    "AgentRetried",
    "AgentStarted",
    "EventHub",
    "LogEmitted",
    "PhaseStarted",
    "QuestionAnswered",
    "QuestionAsked",
    "RunInfo",
    "WorkflowEnded",
    "WorkflowEvent",
    "WorkflowStarted",
]

logger = logging.getLogger("dsh_workflow.events")

AgentOutcome = Literal["completed", "failed", "cancelled", "timeout"]


class RunInfo(BaseModel):
    """Identity of the run an event belongs to (never the live run object)."""

    model_config = ConfigDict(frozen=True)

    id: str
    meta: WorkflowMeta


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True)

    run: RunInfo


class WorkflowStarted(_Event):
    """The first event of every run; fired by ``start()`` before it returns."""


class WorkflowEnded(_Event):
    """The last event of every run, fired exactly once; mirrors the result without its value
    (``error_code`` as :attr:`WorkflowResult.error_code <dsh_workflow.WorkflowResult>`;
    ``agents_failed``: children whose outcome was neither ``completed`` nor ``cancelled``;
    ``agents_cancelled``: children the run's stop or the script's return cancelled). A parked
    run (``stop_reason == "waiting"``) says why in ``waiting_reason``."""

    stop_reason: StopReason
    error: str | None = None
    error_code: WorkflowErrorCode | None = None
    agents_started: int
    usage: Usage = Usage()
    agents_failed: int = 0
    agents_cancelled: int = 0
    waiting_reason: WaitingReason | None = None


class PhaseStarted(_Event):
    """A ``phase(title)`` call."""

    title: str


class LogEmitted(_Event):
    """A ``log(message)`` or ``console.*`` call."""

    message: str


class AgentStarted(_Event):
    """A child started (it holds a concurrency slot and its provider was called). ``model`` is
    the model it asked for, after aliases (None: the provider's default)."""

    seq: int
    label: str
    phase: str | None = None
    model: str | None = None


class AgentEnded(_Event):
    """The end of a started child; exactly one per :class:`AgentStarted`. ``usage`` is what its
    provider reported (None when it reported nothing, or the child was cancelled or timed out).
    ``error`` says why the child did not complete: the engines set it exactly when ``outcome``
    is not ``completed`` (docs/scripts.md, "Truthful outcomes"); not enforced here, so events stored
    before reasons existed still load."""

    seq: int
    label: str
    phase: str | None = None
    outcome: AgentOutcome
    usage: Usage | None = None
    error: AgentFailure | None = None


class AgentReplayed(_Event):
    """An ``agent()`` call of a resumed run answered from the earlier run's journal (docs/durable-runs.md):
    no provider call, no slot, no ``AgentStarted``; label and phase are this run's."""

    seq: int
    label: str
    phase: str | None = None


class AgentRetried(_Event):
    """A started child's provider failed with a fault worth retrying (``cause``:
    ``rate_limited``, ``overloaded``, ``server`` or ``network``) and the engine calls it again
    after ``delay_s`` seconds; ``attempt`` is the attempt that failed (1 for the first call).
    The child stays started: its one ``AgentEnded`` comes after the last attempt. ``usage`` is
    what the failed attempt reported (counted in the run's usage)."""

    seq: int
    label: str
    attempt: int
    cause: ErrorKind
    delay_s: float
    message: str = ""
    usage: Usage | None = None


with warnings.catch_warnings():
    # ``schema`` is the name SPEC §25 gives the field; it hides BaseModel's deprecated
    # ``schema()`` classmethod on this class, which nothing here uses.
    warnings.filterwarnings("ignore", message='Field name "schema"', category=UserWarning)

    class QuestionAsked(_Event):
        """The script asked a person (``ask()`` or ``checkpoint()``, docs/scripts.md):
        ``qid`` names the question for whoever answers it; ``deadline`` is absolute (None: no
        timeout). A resumed run asks again only questions its journal holds no answer for."""

        seq: int
        qid: str
        question: str
        kind: QuestionKind
        schema: dict[str, object] | None = None  # type: ignore[assignment]
        choices: tuple[str, ...] | None = None
        details: str | None = None
        deadline: datetime | None = None


class QuestionAnswered(_Event):
    """The question ``qid`` (asked at ``seq``) was answered: ``by`` says who (``caller``,
    ``answers``, ``terminal``, ``viewer``, ``mcp``, ``command``, ``timeout``)."""

    seq: int
    qid: str
    by: str


WorkflowEvent = (WorkflowStarted | WorkflowEnded | PhaseStarted | LogEmitted | AgentStarted
                 | AgentEnded | AgentReplayed | AgentRetried | QuestionAsked | QuestionAnswered)
Listener = Callable[[WorkflowEvent], object]


class EventHub:
    """Delivers every event to every subscribed listener, in subscription order.

    A listener that raises is logged at WARNING on ``dsh_workflow.events`` and changes nothing:
    later listeners still run and the run goes on. Listeners run on the event-loop thread and
    must not block.
    """

    def __init__(self) -> None:
        self._listeners: list[Listener] = []

    def subscribe(self, listener: Listener) -> Callable[[], None]:
        """Add ``listener``; returns a function that removes it (idempotent)."""
        entry: list[Listener] = [listener]
        self._listeners.append(entry[0])

        def unsubscribe() -> None:
            if entry:
                try:
                    self._listeners.remove(entry.pop())
                except ValueError:
                    pass

        return unsubscribe

    def emit(self, event: WorkflowEvent) -> None:
        """Deliver ``event``; never raises."""
        for listener in tuple(self._listeners):
            try:
                returned = listener(event)
                close = getattr(returned, "close", None)
                if close is not None and hasattr(returned, "send"):
                    close()  # an async listener: its coroutine is never awaited
                    logger.warning("workflow: %s listener returned a coroutine; listeners must "
                                   "be plain functions", type(event).__name__)
            except Exception as exc:  # noqa: BLE001 - containment is the contract
                try:
                    text = repr(exc)
                except Exception:  # noqa: BLE001 - repr() of the raised object may raise
                    text = "[unrenderable exception]"
                logger.warning("workflow: %s listener raised: %s", type(event).__name__, text)

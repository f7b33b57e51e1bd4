"""A run's state, and why it stopped: one value, with one rule for which cause wins.

A run is :class:`RunState` ``CREATED`` until its runtime is launched, ``RUNNING`` while its hook
calls are served, ``STOPPING`` once anything stopped it (its script ended, a cancel, a timeout,
a fault) and ``SETTLED`` once its one result is decided; states only move forward.

What ended it is one :data:`StopCause`, replaced only as :func:`prevails` allows:

1. a **cancel** or the **timeout** — whichever came first — beats everything;
2. a **fault** (the engine or the run store failing, the runtime breaking the protocol, the
   script refused too often) beats the runtime's own end; between faults the first stands,
   except that a protocol violation or an engine bug replaces an earlier fault;
3. the run **parked** (waiting for answers, or a provider's limit) beats the runtime's end made
   by the stop (one without an outcome), and a fault replaces it;
4. the runtime's **end** (its outcome, or None when it was stopped) — the latest report stands.

The result decided from the cause is :func:`.outcome.final_result`'s job.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import Enum

from ..._errors import ENGINE_FAILED, WorkflowErrorCode
from ..._questions import Question, WaitingReason
from ..script.wire import ScriptOutcome

__all__ = ["Cancelled", "Fault", "Parked", "RunState", "RuntimeEnded", "StopCause", "TimedOut",
           "prevails"]


class RunState(Enum):
    """Where a run is in its life (see the module docstring)."""

    CREATED = "created"
    RUNNING = "running"
    STOPPING = "stopping"
    SETTLED = "settled"


@dataclass(frozen=True, slots=True)
class Cancelled:
    """The run was cancelled (by its caller, dispose, or the engine shutting down)."""

    reason: str


@dataclass(frozen=True, slots=True)
class TimedOut:
    """The run exceeded ``run_timeout_s``."""


@dataclass(frozen=True, slots=True)
class Fault:
    """The run cannot go on: ``text`` is its error and ``code`` its result's code (the
    engine's failure unless the text names another). ``overrides``: a fault that replaces an
    earlier one (a protocol violation or an engine bug is the more fundamental failure)."""

    text: str
    overrides: bool = False
    code: WorkflowErrorCode = ENGINE_FAILED
    agent: int | None = None  # the seq of the agent whose failure is the fault, if one


@dataclass(frozen=True, slots=True)
class RuntimeEnded:
    """The runtime sent its end: ``outcome``, or None when it was stopped without one."""

    outcome: ScriptOutcome | None


@dataclass(frozen=True, slots=True)
class Parked:
    """The run parked (docs/durable-runs.md, "Runs that wait"): ``reason`` ``question`` (its
    script waits on nothing but questions nobody is there to answer: ``pending``) or
    ``limit`` (a provider's usage limit; ``resume_after`` when it resets, if known)."""

    reason: WaitingReason
    pending: tuple[Question, ...] = ()
    resume_after: datetime | None = None


StopCause = Cancelled | TimedOut | Fault | RuntimeEnded | Parked


def prevails(new: StopCause, old: StopCause | None) -> bool:
    """True when ``new`` replaces ``old`` as the run's stop cause (the rule, written once)."""
    if old is None:
        return True
    if isinstance(old, (Cancelled, TimedOut)):
        return False
    if isinstance(new, (Cancelled, TimedOut)):
        return True
    if isinstance(new, Parked):
        # it parks a run still running (the stop's own end, with no outcome, may precede it)
        return isinstance(old, RuntimeEnded) and old.outcome is None
    if isinstance(new, Fault):
        return not isinstance(old, Fault) or new.overrides
    return isinstance(old, RuntimeEnded)

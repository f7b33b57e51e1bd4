"""When the parent kills a sandbox process: the watchdog's decision, without a clock.

:class:`Watchdog` answers one question each time the parent looks at a process — kill it now,
or look again at a given time — from numbers it is handed: the current time, the CPU seconds the
process has used (read only when needed, through a callable) and the run's own timestamps. It
never reads a clock, ``/proc`` or anything else, and never sleeps; ``process.py`` does that and
asks it again (see ``ProcessRuntime._watch``). Its rules:

* **Winding down**: once the run was stopped or its end frame arrived, the process is killed
  ``grace_s`` after the earlier of the two (:attr:`KillReason.OUTLIVED`), whatever it is doing.
* **Idle**: a process waiting for a settlement is never killed; look again only when woken.
* **Busy** (a stretch of script runs since ``busy_since``): nothing is measured during the first
  ``interval_s`` of the stretch (most stretches end before), then the CPU is read every
  ``interval_s``. The process is killed when the stretch used more than
  ``2 × slice_cpu_limit_s + 0.5`` CPU seconds since it was last idle
  (:attr:`KillReason.OVERRUN`), or when its CPU made no progress for more than
  ``hang_after_s`` since the last reading that showed some (the stretch's first reading always
  does) (:attr:`KillReason.HUNG`). Where the CPU cannot be read, a stretch is killed as hung
  once it has lasted more than ``hang_after_s + 4 × slice_cpu_limit_s`` of wall time. A new
  ``busy_since`` starts a new stretch: its measurement and its hang timer start over.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

__all__ = ["Kill", "KillReason", "Wake", "WatchVerdict", "Watchdog"]


class KillReason(StrEnum):
    """Why the watchdog wants the process killed (the caller turns it into the run's outcome)."""

    #: One stretch of script used more than ``2 × slice_cpu_limit_s + 0.5`` CPU seconds.
    OVERRUN = "overrun"
    #: Busy without CPU progress for ``hang_after_s`` (or, CPU unreadable, busy too long).
    HUNG = "hung"
    #: Still there ``grace_s`` after the run was stopped or ended: killed with no verdict.
    OUTLIVED = "outlived"


@dataclass(frozen=True)
class Wake:
    """Look again at time ``at`` (``math.inf``: only when woken by a change of the run)."""

    at: float


@dataclass(frozen=True)
class Kill:
    """Kill the process now, for ``reason``."""

    reason: KillReason


WatchVerdict = Wake | Kill


class Watchdog:
    """The kill decision for one sandbox process (see the module docstring).

    ``slice_cpu_limit_s``: the run's CPU slice; ``hang_after_s``: busy without CPU progress for
    this long is a hang; ``grace_s``: how long a stopped or ended process may take to exit.
    It keeps the current stretch's measurements between calls, so one instance watches one
    process. :meth:`check` never raises and calls ``cpu`` at most once.
    """

    def __init__(self, *, slice_cpu_limit_s: float, hang_after_s: float, grace_s: float) -> None:
        self.slice_cpu_limit_s = slice_cpu_limit_s
        self.hang_after_s = hang_after_s
        self.grace_s = grace_s
        #: CPU seconds one stretch may use before it is killed as an overrun.
        self.overrun_cpu_s = 2 * slice_cpu_limit_s + 0.5
        #: How often a busy process's CPU is read (and how long a stretch runs unmeasured).
        self.interval_s = min(0.1, max(0.01, slice_cpu_limit_s / 4))
        #: Wall time a stretch may last when the CPU cannot be read at all.
        self.unmeasured_limit_s = hang_after_s + 4 * slice_cpu_limit_s
        self._episode: float | None = None  # the busy_since of the stretch being measured
        self._last_cpu = -1.0
        self._progress_at = 0.0

    def check(self, now: float, *, busy_since: float | None, stopped_at: float | None,
              ended_at: float | None, cpu_at_idle: float,
              cpu: Callable[[], float | None]) -> WatchVerdict:
        """The verdict at time ``now``.

        ``busy_since``: when the current stretch began (None: the process is idle);
        ``stopped_at``/``ended_at``: when the run was stopped / its end frame arrived (None: not
        yet); ``cpu_at_idle``: the process's CPU seconds when it was last idle (or ready);
        ``cpu``: reads the process's CPU seconds now (None when they cannot be read), called
        only when the stretch is measured.
        """
        since = min(t for t in (stopped_at, ended_at, math.inf) if t is not None)
        if since < math.inf:
            if now >= since + self.grace_s:
                return Kill(KillReason.OUTLIVED)
            return Wake(since + self.grace_s)
        if busy_since is None:
            return Wake(math.inf)
        if self._episode != busy_since:
            self._episode, self._last_cpu, self._progress_at = busy_since, -1.0, now
            return Wake(busy_since + self.interval_s)
        used = cpu()
        if used is None:
            if now - busy_since > self.unmeasured_limit_s:
                return Kill(KillReason.HUNG)
        elif used - cpu_at_idle > self.overrun_cpu_s:
            return Kill(KillReason.OVERRUN)
        elif used > self._last_cpu:
            self._last_cpu, self._progress_at = used, now
        elif now - self._progress_at > self.hang_after_s:
            return Kill(KillReason.HUNG)
        return Wake(now + self.interval_s)

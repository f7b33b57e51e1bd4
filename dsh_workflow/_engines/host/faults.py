"""What the engine does with a provider's classified failure (``SubagentResult.error_kind``):
retry it, end the run, or let it be that child's failure; and the retry gates a provider's
children share.

The decision is the engine's, never a provider's (docs/providers.md, "Faults and retries"):

- ``rate_limited``, ``overloaded``, ``server`` and ``network`` are retried while the child has
  attempts left (``EngineConfig.retry``); the wait is the result's ``retry_at`` when it is within
  ``cap_s`` (then every child of the same provider identity waits for it too: one shared gate),
  else an exponential backoff from ``base_s`` doubling up to ``cap_s``, with full jitter;
- ``auth`` and ``not_found`` (every later child would hit them too), and ``network`` once the
  attempts are spent, end the run with fatal ``AGENT_FAILED`` naming the agent, the cause and
  the reason;
- ``limit`` (a usage limit; also a retried cause whose ``retry_at`` lies beyond ``cap_s``) parks
  the run (``EngineConfig.on_limit="park"``, the default; ``resume_after`` is the ``retry_at``):
  the children still running are cancelled and a resume runs them and it again; with
  ``on_limit="fail"`` it is that child's failure;
- everything else (``bad_request``, ``timeout``, ``other``, a failure the provider did not
  classify) stays that child's failure.
"""

from __future__ import annotations

import random
import time
from datetime import UTC, datetime

import anyio

from ..._config import RetryPolicy
from ..._subagent import ErrorKind, SubagentResult

__all__ = ["FATAL_CAUSES", "RETRIED_CAUSES", "RetryGates", "backoff_delay", "fatal_text",
           "final_cause", "is_fatal", "retry_delay"]

#: Causes retried while attempts are left.
RETRIED_CAUSES: frozenset[str] = frozenset({"rate_limited", "overloaded", "server", "network"})
#: Causes that end the run at once: every later child would hit them too.
FATAL_CAUSES: frozenset[str] = frozenset({"auth", "not_found"})

def is_fatal(cause: ErrorKind | None, *, retries_spent: bool) -> bool:
    """True when a failed child with this cause ends the run: ``auth``, ``not_found``, and
    ``network`` once its retries are spent."""
    return cause in FATAL_CAUSES or (cause == "network" and retries_spent)


def fatal_text(seq: int, label: str, cause: ErrorKind, reason: str, attempts: int) -> str:
    """The fatal error's text after ``AGENT_FAILED: ``: the agent, the cause and the reason's
    first line (``agent 3 (review) failed (auth): the provider refused its credentials: 401
    Incorrect API key``; ``(network, after 3 attempts)``)."""
    first = reason.strip().split("\n", 1)[0] or cause
    after = f", after {attempts} attempts" if cause == "network" and attempts > 1 else ""
    return f"agent {seq} ({label}) failed ({cause}{after}): {first}"


def backoff_delay(policy: RetryPolicy, attempt: int, rng: random.Random | None = None) -> float:
    """Seconds to wait after failed ``attempt`` (1-based): full jitter over
    ``min(cap_s, base_s * 2**(attempt-1))``."""
    ceiling = min(policy.cap_s, policy.base_s * 2.0 ** min(attempt - 1, 60))
    return (rng or random).uniform(0.0, ceiling)


def retry_delay(policy: RetryPolicy, result: SubagentResult, attempt: int,
                now: datetime | None = None) -> tuple[float, bool] | None:
    """How long to wait before the next attempt of a child whose ``attempt`` failed with
    ``result``, and whether the wait is the provider's own (``retry_at``: shared by the
    provider's children); None when it is not retried (a cause not retried, attempts spent, or a
    ``retry_at`` beyond ``cap_s``, which is a limit, not a pause)."""
    if result.error_kind not in RETRIED_CAUSES or attempt >= policy.attempts:
        return None
    if result.retry_at is not None:
        wait = (result.retry_at - (now or datetime.now(UTC))).total_seconds()
        if wait > policy.cap_s:
            return None
        return max(0.0, wait), True
    return backoff_delay(policy, attempt), False


def final_cause(policy: RetryPolicy, result: SubagentResult,
                now: datetime | None = None) -> ErrorKind:
    """The cause a failed child ends with: the result's ``error_kind`` (``other`` when it
    gave none), except that a retried cause whose ``retry_at`` lies beyond ``cap_s`` is a
    ``limit`` (a reset too far to wait for)."""
    kind: ErrorKind = result.error_kind or "other"
    if kind in RETRIED_CAUSES and result.retry_at is not None \
            and (result.retry_at - (now or datetime.now(UTC))).total_seconds() > policy.cap_s:
        return "limit"
    return kind


class RetryGates:
    """One pause per provider identity (and route): while a gate is closed, every child of that
    key waits before its next call. Times are ``time.monotonic()`` values, so a gate needs no
    event loop of its own; a later close extends an earlier one, never shortens it."""

    def __init__(self) -> None:
        self._until: dict[str, float] = {}

    def close_for(self, key: str, seconds: float) -> None:
        """Pause ``key``'s children for ``seconds`` from now (kept if already paused longer)."""
        now = time.monotonic()
        self._until = {k: t for k, t in self._until.items() if t > now}  # forget opened gates
        self._until[key] = max(self._until.get(key, 0.0), now + seconds)

    def remaining(self, key: str) -> float:
        """Seconds until ``key``'s gate opens (0: open)."""
        return max(0.0, self._until.get(key, 0.0) - time.monotonic())

    async def wait(self, key: str) -> None:
        """Return once ``key``'s gate is open (at once when it is); cancellable."""
        # A deadline, not an event: a later close may extend it while this sleeps.
        while (left := self.remaining(key)) > 0:  # noqa: ASYNC110
            await anyio.sleep(left)

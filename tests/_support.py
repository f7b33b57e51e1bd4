"""Test helpers shared by the attack, property and provider-fault suites.

- :func:`check_events`: the event contract of SPEC §3 for one run.
- :func:`child_pids`: the processes this test process has not reaped yet.
- :data:`ENGINE_FACTORIES`: every engine, built from ``(config, provider)``; an engine that
  cannot run here maps to ``None`` with the reason in :data:`ENGINE_SKIPS`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from dsh_workflow import (
    AgentEnded,
    AgentStarted,
    EngineConfig,
    QuickJSEngine,
    WorkflowEnded,
    WorkflowEngine,
    WorkflowEvent,
    WorkflowResult,
    WorkflowRun,
    WorkflowStarted,
)

__all__ = ["ENGINE_SKIPS", "EngineFactory", "check_events", "child_pids", "quickjs_factory",
           "subprocess_factory"]

EngineFactory = Callable[[EngineConfig, Any], AbstractAsyncContextManager[WorkflowEngine]]


def check_events(events: list[WorkflowEvent], run: WorkflowRun, result: WorkflowResult) -> None:
    """The event contract (SPEC §3) for one run: WorkflowStarted first, WorkflowEnded exactly
    once and last and mirroring the result; every AgentStarted (unique seq) paired by exactly
    one later AgentEnded with the same seq, label and phase; agents_started = their count."""
    mine = [e for e in events if e.run.id == run.id]
    kinds = [type(e).__name__ for e in mine]
    assert mine and isinstance(mine[0], WorkflowStarted), f"WorkflowStarted first: {kinds}"
    ends = [e for e in mine if isinstance(e, WorkflowEnded)]
    assert len(ends) == 1 and mine[-1] is ends[0], f"one WorkflowEnded, last: {kinds}"
    assert (ends[0].stop_reason, ends[0].error, ends[0].error_code, ends[0].agents_started) == \
        (result.stop_reason, result.error, result.error_code, result.agents_started), \
        (ends[0], result)
    open_agents: dict[int, AgentStarted] = {}
    seen: set[int] = set()
    for event in mine:
        if isinstance(event, AgentStarted):
            assert event.seq not in seen, f"repeated seq: {event!r}"
            seen.add(event.seq)
            open_agents[event.seq] = event
        elif isinstance(event, AgentEnded):
            start = open_agents.pop(event.seq, None)
            assert start is not None, f"AgentEnded without an open AgentStarted: {event!r}"
            assert (event.label, event.phase) == (start.label, start.phase), (start, event)
    assert not open_agents, f"AgentStarted never ended: {sorted(open_agents)} ({kinds})"
    assert result.agents_started == len(seen), (result.agents_started, len(seen))


def quickjs_factory(config: EngineConfig,
                    provider: Any) -> AbstractAsyncContextManager[WorkflowEngine]:
    return QuickJSEngine(config, provider=provider)


ENGINE_SKIPS: dict[str, str] = {}


def subprocess_factory(pool_size: int) -> EngineFactory | None:
    """A SubprocessEngine factory, or None (reason in ENGINE_SKIPS) where it cannot run."""
    if not sys.platform.startswith("linux"):
        ENGINE_SKIPS["subprocess"] = "SubprocessEngine is checked on Linux only (/proc)"
        return None
    from dsh_workflow import SubprocessEngine

    def make(config: EngineConfig, provider: Any) -> AbstractAsyncContextManager[WorkflowEngine]:
        return SubprocessEngine(config, provider=provider, pool_size=pool_size)

    return make


def child_pids() -> set[int]:
    """Processes (zombies included) whose parent is this process (Linux; else empty)."""
    found: set[int] = set()
    if not sys.platform.startswith("linux"):
        return found
    me = str(os.getpid())
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as handle:
                    stat = handle.read()
            except OSError:
                continue
            if stat[stat.rfind(")") + 2:].split()[1] == me:
                found.add(int(entry))
    return found

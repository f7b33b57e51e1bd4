"""Test helpers shared by the attack, property and provider-fault suites.

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
    EngineConfig,
    QuickJSEngine,
    WorkflowEngine,
)

__all__ = ["ENGINE_SKIPS", "EngineFactory", "child_pids", "quickjs_factory",
           "subprocess_factory"]

EngineFactory = Callable[[EngineConfig, Any], AbstractAsyncContextManager[WorkflowEngine]]


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

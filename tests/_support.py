"""Test helpers shared by the attack, property and provider-fault suites.

- :func:`child_pids`: the processes this test process has not reaped yet.
- :func:`both_engines` and :data:`TIGHT_CONFIG`: the two engines as pytest params, and the
  tight limits of the suites that drive runs into their caps.
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

__all__ = ["ENGINE_SKIPS", "TIGHT_CONFIG", "EngineFactory", "both_engines", "child_pids",
           "quickjs_factory", "subprocess_factory"]

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


#: Tight limits for suites that drive runs into their caps: a small heap and stack, a short
#: CPU slice and a short dispose grace.
TIGHT_CONFIG = EngineConfig(memory_limit_bytes=16 * 1024 * 1024, stack_limit_bytes=256 * 1024,
                            slice_cpu_limit_s=0.3, dispose_grace_s=0.5)


def both_engines() -> list[Any]:
    """pytest params of both engines' factories (ids ``quickjs``, ``subprocess``; the
    subprocess engine with a warm pool of one, skipped where it cannot run)."""
    import pytest

    sandboxed = subprocess_factory(pool_size=1)
    return [pytest.param(quickjs_factory, id="quickjs"),
            pytest.param(sandboxed, id="subprocess",
                         marks=pytest.mark.skipif(sandboxed is None, reason="Linux only"))]


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

"""``SubprocessEngine``: the QuickJS runtime in a locked-down child process per run.

Modules: ``engine`` (the engine), ``process`` (the parent side of one sandbox process),
``watchdog`` (when the parent kills one), ``pool`` (warm processes), ``frames`` (the pipe),
``sandbox`` (how a process is started and what is enforced), ``child`` (the sandbox process's
entry point) and ``confine`` (what the child applies to itself). The sandbox process imports
this package too, so nothing heavy is imported here: the engine is loaded on first access.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .engine import SubprocessEngine
    from .sandbox import SandboxPolicy

__all__ = ["SandboxPolicy", "SubprocessEngine"]


def __getattr__(name: str) -> Any:
    if name == "SubprocessEngine":
        from .engine import SubprocessEngine

        return SubprocessEngine
    if name == "SandboxPolicy":
        from .sandbox import SandboxPolicy

        return SandboxPolicy
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""The one place where QuickJS failures become workflow errors.

Every limit error names the setting and its configured value, so a model (or an operator) can
tell which bound was hit and how to stay under it. No limit is ever reported as the bare JS
text ``null``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import quickjs

from .._errors import WorkflowErrorCode

if TYPE_CHECKING:  # the sandbox child imports this module without pydantic
    from .._config import EngineConfig

__all__ = ["LimitExceeded", "js_limit", "limit_error"]

LimitKind = Literal["memory", "stack", "slice"]


class LimitExceeded(Exception):
    """A per-run limit was hit on the runtime thread."""

    def __init__(self, code: str, message: str, kind: LimitKind) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.kind = kind

    def as_outcome(self) -> dict[str, Any]:
        return {"code": self.code, "error": self.message}


def _mib(n: int) -> str:
    return f"{n / (1024 * 1024):g} MiB"


def limit_error(kind: LimitKind, config: EngineConfig) -> LimitExceeded:
    """The error for ``kind``, naming the setting and its value."""
    code = WorkflowErrorCode.RESOURCE_LIMIT.value
    if kind == "memory":
        return LimitExceeded(code, (
            f"the script ran out of memory: it exceeded memory_limit_bytes="
            f"{config.memory_limit_bytes} ({_mib(config.memory_limit_bytes)}); keep less data "
            "in the script and let agents hold the bulk"), kind)
    if kind == "stack":
        return LimitExceeded(code, (
            f"the script exhausted its stack: recursion deeper than stack_limit_bytes="
            f"{config.stack_limit_bytes} ({_mib(config.stack_limit_bytes)}) allows"), kind)
    return LimitExceeded(code, (
        f"a synchronous stretch of the script used more than slice_cpu_limit_s="
        f"{config.slice_cpu_limit_s:g} seconds of CPU without waiting for an agent() call (an "
        "endless loop, or a promise chain that never yields)"), kind)


def js_limit(exc: quickjs.JSException, config: EngineConfig, *,
             sliced: bool) -> LimitExceeded | None:
    """The limit an exception that escaped a QuickJS call stands for, or None if it is none.

    Only the runtime's own calls raise here (a script's throw becomes a rejection the runtime
    records), so what escapes is the engine failing: the interrupt (uncatchable), or an
    allocation or the stack failing inside the runtime's own code. ``sliced``: the stretch has
    used its whole CPU slice, measured by the caller; an "interrupted" text without it is no
    interrupt of ours.
    """
    head = str(exc).split("\n", 1)[0].strip()
    if sliced and head.startswith("InternalError: interrupted"):
        return limit_error("slice", config)
    if isinstance(exc, quickjs.StackOverflow) or "Maximum call stack size exceeded" in head \
            or "stack overflow" in head:
        return limit_error("stack", config)
    if "out of memory" in head or head in ("", "null"):
        return limit_error("memory", config)
    if sliced:
        return limit_error("slice", config)
    return None

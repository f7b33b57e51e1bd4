"""The runtime's limits as one value, and the one place where QuickJS failures and the
runtime's evidence become workflow errors.

:class:`RuntimeLimits` is what a script runtime is bounded by (the host passes it whole: to the
runtime thread, and as JSON to a sandbox process). Every limit error names the setting and its
configured value, so a model (or an operator) can tell which bound was hit and how to stay
under it. No limit is ever reported as the bare JS text ``null``. :func:`translate_end` turns
the runtime's end record (with its :class:`~.wire.InternalCode` evidence) into the outcome the
host sees, and :func:`engine_failure` the runtime's own crash; nothing else makes a runtime's
failure text.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

import quickjs

from ..._errors import WorkflowErrorCode
from ..._text import json_may_hold_surrogates, valid_data
from .wire import Failed, InternalCode, LimitKind, ScriptOutcome, failed

if TYPE_CHECKING:  # the sandbox child imports this module without pydantic
    from ..._config import EngineConfig

__all__ = ["LimitExceeded", "RuntimeLimits", "cpu_backstop_spent", "engine_failure", "js_limit",
           "limit_error", "not_started", "stalled", "translate_end"]


class RuntimeLimits(NamedTuple):
    """The bounds one script runtime enforces, named as the :class:`~dsh_workflow.EngineConfig`
    settings they come from (so an error text names the setting to change). A named tuple, not
    a dataclass: ``dataclasses`` would cost every sandbox process ~8 ms of start-up."""

    memory_limit_bytes: int
    stack_limit_bytes: int
    slice_cpu_limit_s: float
    max_items_per_call: int
    max_value_depth: int
    max_prompt_chars: int
    max_log_chars: int

    @classmethod
    def of(cls, config: EngineConfig) -> RuntimeLimits:
        """The runtime's limits under ``config``."""
        return cls(**{name: getattr(config, name) for name in cls._fields})

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RuntimeLimits:
        """The limits in ``data`` (an engine configuration as JSON; other settings ignored),
        as a sandbox process receives them."""
        return cls(**{name: data[name] for name in cls._fields})


class LimitExceeded(Exception):
    """A per-run limit was hit on the runtime thread."""

    def __init__(self, code: str, message: str, kind: LimitKind) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.kind = kind

    def as_outcome(self) -> Failed:
        """The failed outcome that reports this limit."""
        return failed(self.message, self.code)


_PUBLIC_CODES = frozenset(code.value for code in WorkflowErrorCode)


def _mib(n: int) -> str:
    return f"{n / (1024 * 1024):g} MiB"


def limit_error(kind: LimitKind, limits: RuntimeLimits) -> LimitExceeded:
    """The error for ``kind``, naming the setting and its value."""
    code = WorkflowErrorCode.RESOURCE_LIMIT.value
    if kind is LimitKind.MEMORY:
        return LimitExceeded(code, (
            f"the script ran out of memory: it exceeded memory_limit_bytes="
            f"{limits.memory_limit_bytes} ({_mib(limits.memory_limit_bytes)}); keep less data "
            "in the script and let agents hold the bulk"), kind)
    if kind is LimitKind.STACK:
        return LimitExceeded(code, (
            f"the script exhausted its stack: recursion deeper than stack_limit_bytes="
            f"{limits.stack_limit_bytes} ({_mib(limits.stack_limit_bytes)}) allows"), kind)
    return LimitExceeded(code, (
        f"a synchronous stretch of the script used more than slice_cpu_limit_s="
        f"{limits.slice_cpu_limit_s:g} seconds of CPU without waiting for an agent() call (an "
        "endless loop, or a promise chain that never yields)"), kind)


def js_limit(exc: quickjs.JSException, limits: RuntimeLimits, *,
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
        return limit_error(LimitKind.SLICE, limits)
    if isinstance(exc, quickjs.StackOverflow) or "Maximum call stack size exceeded" in head \
            or "stack overflow" in head:
        return limit_error(LimitKind.STACK, limits)
    if "out of memory" in head or head in ("", "null"):
        return limit_error(LimitKind.MEMORY, limits)
    if sliced:
        return limit_error(LimitKind.SLICE, limits)
    return None


def engine_failure(detail: str) -> Failed:
    """The outcome of the runtime itself failing (not the script): ``detail`` says how."""
    return failed(f"workflow runtime failed: {detail}")


def cpu_backstop_spent() -> Failed:
    """The outcome of a sandbox process killed by its whole-run CPU backstop (RLIMIT_CPU)."""
    return failed("the sandbox process used up its whole-run CPU backstop (RLIMIT_CPU) and was "
                  "killed", WorkflowErrorCode.RESOURCE_LIMIT.value)


def not_started(exc: BaseException) -> Failed:
    """The outcome of a runtime that could not even start (e.g. no thread available)."""
    return failed(f"the script runtime could not start: {exc}")


def stalled() -> Failed:
    """The outcome of a script awaiting a promise that nothing will settle."""
    return failed(
        "the script is waiting for a promise that nothing will ever settle: no agent() call is "
        "in flight (for example `await new Promise(() => {})`, or a then() callback that is "
        "never called)", InternalCode.STALLED.value)


def _valid_outcome(outcome: dict[Any, Any]) -> dict[Any, Any]:
    """``outcome`` with text UTF-8 cannot hold made U+FFFD: in a returned value with a warning
    per place (``return value.items[2]: a lone surrogate became U+FFFD``), elsewhere (an
    error's text) silently, as the error shows it."""
    fixed: dict[Any, Any] = {key: valid_data(item, key)[0] for key, item in outcome.items()
                             if key != "value"}
    if "value" in outcome:
        fixed["value"], notes = valid_data(outcome["value"], "return value")
        if notes:
            fixed["warnings"] = [*(fixed.get("warnings") or []), *notes]
    return fixed


def translate_end(text: str, limits: RuntimeLimits, *, sliced: Callable[[], bool],
                  near_memory: Callable[[], bool]) -> ScriptOutcome:
    """The run's outcome from the runtime's end record (see ``thrownRecord`` in hooks.js).

    Internal codes are evidence, confirmed here by what the driver measured: ``sliced()``
    (the stretch used its whole CPU slice) and ``near_memory()`` (the heap is nearly full),
    each asked only when a code needs it. A limit becomes its ``RESOURCE_LIMIT`` error; every
    other internal code becomes the script's own failure (``code`` None), so no internal code
    reaches the host — except ``STALLED``, which only :func:`stalled` makes.
    """
    try:
        outcome = json.loads(text)
    except ValueError:
        outcome = None
    if not isinstance(outcome, dict):
        return engine_failure("it recorded a malformed result")
    if json_may_hold_surrogates(text):
        outcome = _valid_outcome(outcome)
    if outcome.get("ok") is True:
        return outcome  # type: ignore[return-value]  # JSON checked as a success
    code = outcome.get("code")
    if code in (InternalCode.MEMORY, InternalCode.STACK):
        # An engine-made error (limitKind), or the heap probe's evidence.
        return limit_error(LimitKind(code.lower()), limits).as_outcome()
    if code == InternalCode.INTERRUPTED:
        if sliced():
            return limit_error(LimitKind.SLICE, limits).as_outcome()
        outcome["code"] = None
    elif code == InternalCode.THROWN_NOTHING:
        thrown = outcome.get("error")
        if thrown == "null" and near_memory():
            return limit_error(LimitKind.MEMORY, limits).as_outcome()
        outcome["code"], outcome["thrown"] = None, True
        outcome["error"] = f"the script threw {thrown}, not an Error" + (
            "" if thrown != "null" else
            " — or it ran out of memory so completely that QuickJS could not even create "
            "the error (it then throws a bare null); the heap was not near "
            f"memory_limit_bytes={limits.memory_limit_bytes} when the runtime "
            "looked, after the failing code's own variables were released")
    elif code == InternalCode.MEMORY_IF_FULL:
        if near_memory():
            return limit_error(LimitKind.MEMORY, limits).as_outcome()
        outcome["code"] = None
    elif code == InternalCode.UNRENDERABLE:
        if near_memory():
            return limit_error(LimitKind.MEMORY, limits).as_outcome()
        outcome["code"], outcome["thrown"] = None, True
        outcome["error"] = ("the script failed, and what it threw could not be rendered as "
                            "text")
    elif code is not None and code not in _PUBLIC_CODES:
        # STALLED is the driver's, NULL never leaves the runtime: the record itself is wrong.
        return engine_failure(f"it recorded an unknown result code {str(code)[:40]!r}")
    return outcome  # type: ignore[return-value]  # a failure record, its code translated

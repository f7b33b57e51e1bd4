"""The shapes that cross between a run's host and its script runtime, defined once.

Three parties speak these shapes: the JavaScript runtime (``runtime_js/``), the runtime's
driver (:mod:`.thread`, in-process or inside a sandbox process, where they also cross the
pipe of ``_engines/subprocess/frames.py``) and the host (``_engines/host/``). The JSON that
crosses is unchanged by naming it here: outcomes are JSON objects, settle entries and hook
messages JSON arrays.

* **Hook messages** (runtime → host, a batch per outbox text), by :class:`HookKind`::

      ["agent", call_id, prompt, options | null]
      ["workflow", call_id, name | {"scriptPath": path}, args]
      ["phase", title]   ["log", text]
      ["numbers", "clock" | "random", first_index, [number, ...]]   (runs with a store)
      ["numbers", "race", ordinal, [winner_index]]   (first()'s winner; runs with a store)
      ["cancel", [call_id, ...]]   (first()'s losers: end those calls' children now)
      ["ask", call_id, "ask" | "checkpoint", question, options | null]   (a question)
      ["idle", n]   (the script waits on nothing but its n open questions; once per wait)

* **Settle entries** (host → runtime): :func:`answer` (a failed child's null carries its
  reason, which ``settle()`` reports), :func:`refusal`, :func:`spent`, :func:`agent_failure`
  (a failed child of a ``failure: "throw"`` call).
* **Outcomes** (the runtime's end record, then the driver's verdict): :class:`Completed` or
  :class:`Failed`; a failed outcome's ``code`` is a public :class:`~.._errors.WorkflowErrorCode`
  value, an :class:`InternalCode` (the runtime's evidence, translated by :mod:`.limits` before
  the host sees it) or None.
* **Reports** (driver → host, in order): :class:`ReportKind`.

This module is pure (no pydantic, no I/O): the sandbox child imports it.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Literal, NotRequired, Protocol, TypedDict

__all__ = [
    "AGENT_FAILURE_TAG",
    "COMPLETED_KEYS",
    "COMPLETED_REQUIRED_KEYS",
    "FAILED_KEYS",
    "FAILED_REQUIRED_KEYS",
    "HOST_MADE_CODES",
    "JS_ONLY_CODES",
    "MAX_WARNINGS",
    "MAX_WARNING_CHARS",
    "SPENT_TAG",
    "Completed",
    "Failed",
    "HookKind",
    "InternalCode",
    "LimitKind",
    "ReportKind",
    "ScriptOutcome",
    "ScriptRuntime",
    "SettleEntry",
    "agent_failure",
    "answer",
    "failed",
    "refusal",
    "spent",
    "warnings_of",
]


class InternalCode(StrEnum):
    """Codes of the runtime's evidence: never shown to a user (see ``limits.translate_end``).

    The JavaScript spells each one identically (``runtime_js/hooks.js``, ``boundary.js``);
    ``tests/unit/test_wire.py`` checks both sides name the same set.
    """

    #: The script awaits a promise nothing will settle (made by the runtime's driver).
    STALLED = "STALLED"
    #: An engine-made out-of-memory error, or a bare null with the heap probe's evidence.
    MEMORY = "MEMORY"
    #: An engine-made stack overflow.
    STACK = "STACK"
    #: An engine-made interrupt: a CPU-slice overrun once the driver confirms the CPU spent.
    INTERRUPTED = "INTERRUPTED"
    #: The script threw null or undefined (``error`` says which).
    THROWN_NOTHING = "THROWN_NOTHING"
    #: Out of memory only if the heap is full when the driver looks.
    MEMORY_IF_FULL = "MEMORY_IF_FULL"
    #: The runtime's fixed end record: what was thrown could not be rendered.
    UNRENDERABLE = "UNRENDERABLE"
    #: A bare null met while rendering a thrown value (boundary.js ``renderLimit``); becomes
    #: MEMORY_IF_FULL before it leaves the runtime.
    NULL = "NULL"


#: Internal codes only the Python driver makes (the JavaScript never spells them).
HOST_MADE_CODES = frozenset({InternalCode.STALLED})
#: Internal codes that never leave the JavaScript runtime.
JS_ONLY_CODES = frozenset({InternalCode.NULL})


class LimitKind(StrEnum):
    """The per-run limits a runtime enforces (their errors: ``limits.limit_error``)."""

    MEMORY = "memory"
    STACK = "stack"
    SLICE = "slice"


class ReportKind(StrEnum):
    """What a runtime reports to its run, in order: outbox texts, then exactly one end."""

    #: JSON text of one batch of hook messages.
    OUTBOX = "outbox"
    #: The unserved rest of a batch, queued by the host itself (a list of messages).
    REST = "rest"
    #: The run's outcome (a :data:`ScriptOutcome`, or None when the runtime was stopped).
    END = "end"


class HookKind(StrEnum):
    """The first element of a hook message (see the module docstring for each shape)."""

    AGENT = "agent"
    WORKFLOW = "workflow"
    PHASE = "phase"
    LOG = "log"
    NUMBERS = "numbers"
    #: ``first()`` cancels the calls of its losers (the ids of calls still in flight).
    CANCEL = "cancel"
    #: ``ask()`` or ``checkpoint()``: a question for a person.
    ASK = "ask"
    #: The script waits on nothing but questions (a host with nobody to answer parks the run).
    IDLE = "idle"


class Completed(TypedDict):
    """The script returned ``value`` (JSON data, as ``JSON.stringify`` made it). ``warnings``
    (present when there are any): each lossy step of that conversion, with its path, at most
    ``MAX_WARNINGS`` of them plus one ``... and N more`` line."""

    ok: Literal[True]
    value: Any
    warnings: NotRequired[list[str]]


class Failed(TypedDict):
    """The run failed. ``thrown`` and ``stack`` (the script's frame lines) are present when
    the script threw it."""

    ok: Literal[False]
    code: str | None
    error: str
    thrown: NotRequired[Literal[True]]
    stack: NotRequired[str]


ScriptOutcome = Completed | Failed

#: A settle entry: ``[call_id, True, value]``, ``[call_id, True, None, {kind, message,
#: details}]`` (a failed child, with its reason), ``[call_id, False, code, message]``,
#: ``[call_id, False, "AgentFailure", message, {kind, message, details}]``,
#: ``["spent", tokens]`` or ``["spent", tokens, dollars]`` (a list: it crosses as a JSON array).
SettleEntry = list[Any]

#: The keys each outcome may carry (the subprocess protocol refuses any other).
COMPLETED_KEYS = frozenset(Completed.__annotations__)
#: The keys every completed outcome carries.
COMPLETED_REQUIRED_KEYS = frozenset({"ok", "value"})
#: Warnings a completed outcome keeps (``MAX_WARNINGS`` in boundary.js, spelled identically),
#: before its ``... and N more`` line; and the longest text one warning may have on the host.
MAX_WARNINGS = 20
MAX_WARNING_CHARS = 400
FAILED_KEYS = frozenset(Failed.__annotations__)
#: The keys every failed outcome carries (spelled out: with postponed annotations, a TypedDict
#: cannot tell its NotRequired keys apart at run time).
FAILED_REQUIRED_KEYS = frozenset({"ok", "code", "error"})
#: The settle entry's tag for the run's spend (see :func:`spent`).
SPENT_TAG = "spent"
#: The refusal code of :func:`agent_failure` (the error's ``name`` in the script; no
#: :class:`~.._errors.WorkflowErrorCode`: the error is not fatal).
AGENT_FAILURE_TAG = "AgentFailure"


def failed(error: str, code: str | None = None) -> Failed:
    """A failed outcome with ``error`` as its text."""
    return {"ok": False, "code": code, "error": error}


def answer(call_id: int, value: Any, failure: dict[str, Any] | None = None) -> SettleEntry:
    """The entry that resolves hook call ``call_id`` with ``value`` (None: a failed child,
    whose ``failure`` — ``{"kind", "message", "details"}`` — rides along when known: the script
    sees only the null, ``settle()`` the reason)."""
    return [call_id, True, value] if failure is None else [call_id, True, value, failure]


def refusal(call_id: int, code: str, message: str) -> SettleEntry:
    """The entry that makes hook call ``call_id`` throw ``code: message`` in the script."""
    return [call_id, False, code, message]


def agent_failure(call_id: int, failure: dict[str, Any]) -> SettleEntry:
    """The entry that makes hook call ``call_id`` reject with a non-fatal ``AgentFailure``
    error carrying ``failure`` (``{"kind", "message", "details"}``)."""
    return [call_id, False, AGENT_FAILURE_TAG, failure.get("message", ""), failure]


def spent(tokens: int, dollars: float | None = None) -> SettleEntry:
    """The entry that tells the script's ``budget`` global the run's tokens and dollars (the
    children's known costs; left out while none is known) spent so far."""
    return [SPENT_TAG, tokens] if dollars is None else [SPENT_TAG, tokens, dollars]


class ScriptRuntime(Protocol):
    """What the host needs of a script runtime (see ``ThreadRuntime`` for the contract): it
    reports :class:`ReportKind` ``(kind, payload)`` pairs to its run and takes settle entries."""

    def start(self) -> None: ...

    def settle(self, entry: SettleEntry) -> None: ...

    def stop(self) -> None: ...

    def is_alive(self) -> bool: ...


def warnings_of(outcome: Completed) -> tuple[str, ...]:
    """The warnings of a completed outcome, checked again on the host: strings only, at most
    ``MAX_WARNINGS + 1`` of them (the last may be the ``... and N more`` line), each cut at
    ``MAX_WARNING_CHARS``."""
    raw = outcome.get("warnings")
    if not isinstance(raw, list):
        return ()
    kept = [w if len(w) <= MAX_WARNING_CHARS else w[:MAX_WARNING_CHARS - 1] + "…"
            for w in raw[:MAX_WARNINGS + 1] if isinstance(w, str)]
    return tuple(kept)

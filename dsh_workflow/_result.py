"""The one result every run ends with."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ._errors import SCRIPT_FAILED, WorkflowErrorCode
from ._questions import Question, QuestionKind, WaitingReason
from ._subagent import Usage

__all__ = ["StopReason", "WorkflowResult", "code_in_text", "stored_code", "with_error_code"]

StopReason = Literal["completed", "cancelled", "error", "waiting"]


def code_in_text(error: str) -> WorkflowErrorCode | None:
    """The code an error text starts with as ``CODE:``, or None when it starts with none (a
    head such as ``TypeError:`` or ``NOT_A_CODE:`` is no code)."""
    head, colon, _ = error.partition(":")
    if not colon:
        return None
    try:
        return WorkflowErrorCode(head)
    except ValueError:
        return None


def _derived_code(stop_reason: object, error: object) -> WorkflowErrorCode | None:
    """The code of a result given without one: a hand-built result, or one stored before
    results carried their code. The engine never relies on this: it sets the code from what
    it knows. Taken from the text's ``CODE:`` prefix; else ``CANCELLED`` for a cancelled run;
    else :data:`~dsh_workflow._errors.SCRIPT_FAILED` (an unprefixed text is most often the
    script's own error; an engine failure cannot be told from its text)."""
    if stop_reason in ("completed", "waiting") or not isinstance(error, str):
        return None
    named = code_in_text(error)
    if named is not None:
        return named
    return WorkflowErrorCode.CANCELLED if stop_reason == "cancelled" else SCRIPT_FAILED


def stored_code(data: Mapping[str, Any]) -> WorkflowErrorCode | None:
    """The code of a result stored as JSON data (``WorkflowResult.model_dump``): its
    ``error_code`` when it carries a known one, else derived as for a result built without
    one (a row written before results carried their code). A row written before
    ``SCRIPT_ERROR`` existed holds ``RESULT_UNSERIALIZABLE`` with an unprefixed text for the
    script's own error: that reads as ``SCRIPT_ERROR``."""
    try:
        code = WorkflowErrorCode(data["error_code"])
    except (KeyError, ValueError, TypeError):  # TypeError: stored data holding no code at all
        return _derived_code(data.get("stop_reason"), data.get("error"))
    error = data.get("error")
    if (code == WorkflowErrorCode.RESULT_UNSERIALIZABLE and isinstance(error, str)
            and code_in_text(error) is None):
        return SCRIPT_FAILED
    return code


def with_error_code(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` (a stored result) with its ``error_code`` as :func:`stored_code` reads it:
    itself when it is no failed result or already holds that code; else a copy with it (rows
    written before results carried their code, or before ``SCRIPT_ERROR`` existed)."""
    if not isinstance(data.get("error"), str):
        return data
    code = stored_code(data)
    if code is None or data.get("error_code") == code.value:
        return data
    return {**data, "error_code": code.value}


class WorkflowResult(BaseModel):
    """How a run ended.

    ``error`` is present exactly when ``stop_reason`` is not ``"completed"``, and ``value`` is
    ``None`` then. ``error_code`` is likewise None exactly when the run completed: it is the
    code of what ended the run, and when ``error`` starts with ``CODE:`` it is that code; a
    cancelled run's code is ``CANCELLED``. Texts without a prefix (a cancel, the script's own
    error, a stall, the engine failing) have the codes the table in ``dsh_workflow._errors``
    gives. A result built without ``error_code`` gets it from its text (see
    :func:`_derived_code`); an explicit one that breaks these rules is refused.

    ``agents_started`` counts children that actually started (not calls that were refused or
    still queued behind the concurrency cap when the run ended). ``usage`` sums what the run's
    children reported (failed children included; zero when nothing was reported).
    ``agents_replayed`` counts calls of a resumed run answered from the earlier run's journal
    (docs/durable-runs.md); they are not in ``agents_started`` or ``usage``.

    ``warnings`` name each lossy step of turning the return value into JSON as
    ``JSON.stringify`` does (``return value.items[2]: undefined became null``), bounded: at
    most 20 plus one ``... and N more`` line. Before them, whatever the run's end, one line per
    key of the meta the engine keeps but does not use and per phase given as a bare title
    (``meta.examples is not a recognized field: kept, not used``). Empty when there is neither.

    ``agents_failed`` counts started children whose outcome was neither ``completed`` nor
    ``cancelled`` (docs/scripts.md, "Truthful outcomes"): each one's reason is its
    ``AgentEnded.error``. ``agents_cancelled`` counts those the run's stop (or the script's
    return while they still ran) cancelled.

    A parked run (``stop_reason == "waiting"``, docs/durable-runs.md) has neither value nor
    error: ``waiting_reason`` says why (``question``: ``pending`` holds its open questions;
    ``limit``: a provider's usage limit, ``resume_after`` when it resets, an aware datetime or
    None when the provider did not say). ``resume`` or ``answer`` continues it. The three are
    empty/None for every other stop reason.

    ``agents_unpriced`` counts started children that reported tokens but no known cost: when it
    is above 0, ``usage.cost_usd`` is the cost of the others only, a lower bound (docs/embedding.md, "Cost
    in money").
    """

    model_config = ConfigDict(frozen=True)

    value: Any = None
    stop_reason: StopReason
    error: str | None = None
    error_code: WorkflowErrorCode | None = None
    agents_started: int = Field(0, ge=0)
    usage: Usage = Usage()
    agents_replayed: int = Field(0, ge=0)
    warnings: tuple[str, ...] = ()
    agents_failed: int = Field(0, ge=0)
    agents_unpriced: int = Field(0, ge=0)
    agents_cancelled: int = Field(0, ge=0)
    pending: tuple[Question, ...] = ()
    waiting_reason: WaitingReason | None = None
    resume_after: datetime | None = None

    @model_validator(mode="before")
    @classmethod
    def _code_when_not_given(cls, data: Any) -> Any:
        if isinstance(data, dict) and "error_code" not in data:
            code = _derived_code(data.get("stop_reason"), data.get("error"))
            if code is not None:
                data = {**data, "error_code": code}
        return data

    @model_validator(mode="after")
    def _error_iff_not_completed(self) -> WorkflowResult:
        waiting = self.stop_reason == "waiting"
        if waiting != (self.waiting_reason is not None):
            raise ValueError("waiting_reason must be present exactly when stop_reason is "
                             "'waiting'")
        if not waiting and (self.pending or self.resume_after is not None):
            raise ValueError("pending and resume_after belong to a waiting run")
        quiet = self.stop_reason in ("completed", "waiting")
        if quiet != (self.error is None):
            raise ValueError("error must be present exactly when stop_reason is neither "
                             "'completed' nor 'waiting'")
        if self.stop_reason != "completed" and self.value is not None:
            raise ValueError("value must be None unless the run completed")
        if quiet != (self.error_code is None):
            raise ValueError("error_code must be present exactly when stop_reason is neither "
                             "'completed' nor 'waiting'")
        if self.stop_reason == "cancelled" and self.error_code != WorkflowErrorCode.CANCELLED:
            raise ValueError("a cancelled run's error_code is CANCELLED")
        named = None if self.error is None else code_in_text(self.error)
        if named is not None and named != self.error_code:
            raise ValueError(f"error_code {self.error_code} differs from the code the error "
                             f"text starts with ({named})")
        return self


# The package's lazy loader renames public types to ``dsh_workflow.<Name>``, where Question's
# annotations would not resolve when the schema is built: name them here.
WorkflowResult.model_rebuild(_types_namespace={"QuestionKind": QuestionKind, "Any": Any,
                                               "datetime": datetime})

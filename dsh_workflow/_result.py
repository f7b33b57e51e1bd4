"""The one result every run ends with."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from ._subagent import Usage

__all__ = ["StopReason", "WorkflowResult"]

StopReason = Literal["completed", "cancelled", "error"]


class WorkflowResult(BaseModel):
    """How a run ended.

    ``error`` is present exactly when ``stop_reason`` is not ``"completed"``, and ``value`` is
    ``None`` then. ``agents_started`` counts children that actually started (not calls that
    were refused or still queued behind the concurrency cap when the run ended). ``usage`` sums
    what the run's children reported (failed children included; zero when nothing was reported).
    ``agents_replayed`` counts calls of a resumed run answered from the earlier run's journal
    (SPEC §9); they are not in ``agents_started`` or ``usage``.
    """

    model_config = ConfigDict(frozen=True)

    value: Any = None
    stop_reason: StopReason
    error: str | None = None
    agents_started: int = Field(0, ge=0)
    usage: Usage = Usage()
    agents_replayed: int = Field(0, ge=0)

    @model_validator(mode="after")
    def _error_iff_not_completed(self) -> WorkflowResult:
        if (self.stop_reason == "completed") != (self.error is None):
            raise ValueError("error must be present exactly when stop_reason is not 'completed'")
        if self.stop_reason != "completed" and self.value is not None:
            raise ValueError("value must be None unless the run completed")
        return self

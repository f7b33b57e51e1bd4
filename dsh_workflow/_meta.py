"""The workflow identity block: ``WorkflowMeta`` and ``PhaseMeta``."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ._errors import WorkflowError, WorkflowErrorCode

__all__ = ["PhaseMeta", "WorkflowMeta", "parse_meta"]


class PhaseMeta(BaseModel):
    """One declared phase: progress vocabulary only (``phase()`` does not check against it)."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    title: str = Field(min_length=1)
    detail: str | None = None
    provider: str | None = None
    model: str | None = None


class WorkflowMeta(BaseModel):
    """Name, description and optional guidance of a workflow.

    Accepts field names and aliases (``when_to_use`` / ``whenToUse``); dumps by alias.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True, populate_by_name=True,
                              serialize_by_alias=True)

    name: str = Field(min_length=1)
    description: str = Field(min_length=1)
    when_to_use: str | None = Field(None, alias="whenToUse")
    phases: list[PhaseMeta] | None = None


def _location(loc: tuple[Any, ...]) -> str:
    path = "meta"
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part in ("PhaseMeta",):
            continue
        else:
            path += f".{part}"
    return path


def _describe(error: dict[str, Any]) -> str:
    where = _location(tuple(error["loc"]))
    kind = error["type"]
    field = str(error["loc"][-1]) if error["loc"] else ""
    if kind == "extra_forbidden":
        return f"{where} is not a recognized field"
    if kind == "missing" and field in ("name", "description", "title"):
        return f"{where} must be a non-empty string"
    if kind == "missing":
        return f"{where} is required"
    if kind in ("string_too_short",) or (kind == "string_type" and field in ("name", "description", "title")):
        return f"{where} must be a non-empty string"
    if kind == "string_type":
        return f"{where} must be a string"
    if kind in ("list_type",):
        return f"{where} must be an array"
    if kind in ("model_type", "model_attributes_type", "dict_type"):
        return f"{where} must be an object"
    return f"{where}: {error['msg']}"


def parse_meta(value: WorkflowMeta | Any) -> WorkflowMeta:
    """Validate ``value`` into a :class:`WorkflowMeta`.

    Raises ``WorkflowError(META_INVALID)`` listing every violation, joined by ``"; "``, in one
    message that starts with ``invalid meta:``. Never returns the caller's own dict.
    """
    if isinstance(value, WorkflowMeta):
        return value
    if not isinstance(value, dict):
        raise WorkflowError(WorkflowErrorCode.META_INVALID, "invalid meta: meta must be an object")
    try:
        return WorkflowMeta.model_validate(value)
    except ValidationError as exc:
        problems: list[str] = []
        for error in exc.errors():
            text = _describe(dict(error))
            if text not in problems:
                problems.append(text)
        raise WorkflowError(WorkflowErrorCode.META_INVALID,
                            "invalid meta: " + "; ".join(problems)) from None

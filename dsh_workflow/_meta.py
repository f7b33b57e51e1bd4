"""The workflow identity block: ``WorkflowMeta`` and ``PhaseMeta``.

Claude Code runs scripts whose meta carries keys it does not know (``examples``) and phases
written as bare titles, so both are accepted here too: unknown keys are kept (in the dump) and
each is named in :func:`meta_warnings`, as is each phase given as a string.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, model_validator

from ._errors import WorkflowError, WorkflowErrorCode

__all__ = ["PhaseMeta", "WorkflowMeta", "meta_warnings", "parse_meta"]


class PhaseMeta(BaseModel):
    """One declared phase: progress vocabulary only (``phase()`` does not check against it).

    A bare string is the phase's title (``phases: ["Review", "Judge"]``); unknown keys are kept.
    """

    model_config = ConfigDict(frozen=True, extra="allow", strict=True)

    title: str = Field(min_length=1)
    detail: str | None = None
    provider: str | None = None
    model: str | None = None
    _given_as_title: bool = PrivateAttr(default=False)

    @model_validator(mode="wrap")
    @classmethod
    def _title_alone(cls, data: Any, handler: Callable[[Any], PhaseMeta]) -> PhaseMeta:
        if not isinstance(data, str):
            return handler(data)
        phase = handler({"title": data})
        phase._given_as_title = True
        return phase


class WorkflowMeta(BaseModel):
    """Name, description and optional guidance of a workflow.

    Accepts field names and aliases (``when_to_use`` / ``whenToUse``); dumps by alias. Keys
    it does not know are kept as they are (see :func:`meta_warnings`).
    """

    model_config = ConfigDict(frozen=True, extra="allow", strict=True, populate_by_name=True,
                              serialize_by_alias=True)

    name: str = Field(min_length=1)
    description: str = Field(min_length=1)
    when_to_use: str | None = Field(None, alias="whenToUse")
    phases: list[PhaseMeta] | None = None


def meta_warnings(meta: WorkflowMeta) -> tuple[str, ...]:
    """One line per thing of ``meta`` the engine accepts but does not use: each unknown key
    (``meta.examples is not a recognized field: kept, not used``) and each phase given as a
    string (taken as its title), in the meta's order. Empty for meta that uses only known
    fields."""
    warnings = [f"meta.{key} is not a recognized field: kept, not used"
                for key in meta.model_extra or {}]
    for index, phase in enumerate(meta.phases or ()):
        where = f"meta.phases[{index}]"
        if phase._given_as_title:
            warnings.append(f"{where} is a string: taken as the phase's title")
        warnings.extend(f"{where}.{key} is not a recognized field: kept, not used"
                        for key in phase.model_extra or {})
    return tuple(warnings)


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
        loc = tuple(error["loc"])
        if len(loc) == 2 and loc[0] == "phases":
            return f"{where} must be an object or a string (the title)"
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

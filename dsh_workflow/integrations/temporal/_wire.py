"""What crosses the Temporal wire between :class:`TemporalProvider` and a worker.

One child is one activity named :data:`CHILD_ACTIVITY`. Its single argument is a
:class:`~dsh_workflow.SubagentRequest` dumped to JSON data (:func:`request_to_wire`); its
result is a :class:`~dsh_workflow.SubagentResult` dumped the same way (:func:`result_to_wire`).
Plain JSON dictionaries keep the two sides free to run different versions of the package as
long as the fields agree, and keep payloads readable in Temporal's own tools.
"""

from __future__ import annotations

import json
from typing import Any

from ..._subagent import SubagentRequest, SubagentResult

__all__ = ["CHILD_ACTIVITY", "activity_id", "request_from_wire", "request_to_wire",
           "result_from_wire", "result_to_wire"]

CHILD_ACTIVITY = "dsh_workflow.child"
"""The activity type every worker registers and every provider call starts."""


def activity_id(run_id: str, seq: int) -> str:
    """The activity id of child ``seq`` of run ``run_id``: the same call always gets the same id,
    so a start the client retries attaches to the activity already running instead of
    starting a second one."""
    return f"dsh-workflow/{run_id}/{seq}"


def _json_or_none(value: Any) -> Any:
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        return None
    return value


def request_to_wire(request: SubagentRequest) -> dict[str, Any]:
    """The request as JSON data. ``parent`` is opaque attribution that may hold live objects;
    it travels only when it is JSON data, else it arrives as ``None``."""
    data = request.model_dump(mode="json", by_alias=True, exclude={"parent"})
    data["parent"] = _json_or_none(request.parent)
    return data


def request_from_wire(data: Any) -> SubagentRequest:
    """The worker's side of :func:`request_to_wire`; ``ValueError`` for anything else."""
    return SubagentRequest.model_validate(data)


def result_to_wire(result: SubagentResult) -> dict[str, Any]:
    return result.model_dump(mode="json")


def result_from_wire(data: Any) -> SubagentResult:
    """The provider's side of :func:`result_to_wire`; ``ValueError`` for anything else."""
    return SubagentResult.model_validate(data)

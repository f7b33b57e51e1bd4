"""What every engine does in ``start()`` before a run exists: the checks, in the seam's order,
and the run object they lead to."""

from __future__ import annotations

import enum
import json
import uuid
from dataclasses import dataclass
from typing import Any

from anyio.abc import TaskGroup

from .._config import EngineConfig
from .._depth import deeper_than
from .._errors import WorkflowError, WorkflowErrorCode
from .._events import EventHub
from .._meta import WorkflowMeta, parse_meta
from .._request import WorkflowStartRequest
from .._script import check_body, run_header
from .._subagent import SubagentProvider
from .host import HostedRun
from .runtime import body_line_offset

__all__ = ["Admission", "EngineState", "admit", "encode_args", "hosted_run",
           "resolve_provider", "resolve_total_cap"]


class EngineState(enum.Enum):
    UNOPENED = "unopened"  # constructed; start() refused
    OPEN = "open"          # inside `async with`; start() accepted
    CLOSED = "closed"      # the block was left; every run was disposed; start() refused


@dataclass(frozen=True)
class Admission:
    """A start request that passed every start-time check."""

    meta: WorkflowMeta
    script: str
    provider: SubagentProvider
    max_total_agents: int
    args_text: str | None
    parent: Any


def resolve_total_cap(value: object, ceiling: int) -> int:
    """The per-run total-agent cap: ``value`` if given (it may only lower ``ceiling``)."""
    if value is None:
        return ceiling
    if type(value) is not int or value < 1:
        raise WorkflowError(WorkflowErrorCode.INVALID_ARGUMENT,
                            f"max_total_agents must be a positive integer (got {value!r})")
    if value > ceiling:
        raise WorkflowError(WorkflowErrorCode.INVALID_ARGUMENT, (
            f"max_total_agents {value} exceeds the engine ceiling (max_total_agents={ceiling}); "
            "a run may only lower it"))
    return value


def resolve_provider(value: object, default: SubagentProvider) -> SubagentProvider:
    """The run's provider: ``value`` if given, which must have an async ``run(request)``."""
    if value is None:
        return default
    if not callable(getattr(value, "run", None)):
        raise WorkflowError(WorkflowErrorCode.INVALID_ARGUMENT, (
            f"provider must be a SubagentProvider with an async run(request) method "
            f"(got {type(value).__name__})"))
    return value  # type: ignore[return-value]


def encode_args(args: Any, max_depth: int | None = None) -> str | None:
    """``args`` as ASCII JSON text for the runtime, or None when absent; refused when nested
    deeper than ``max_depth`` (the runtime parses it recursively)."""
    if args is None:
        return None
    if max_depth is not None and deeper_than(args, max_depth):
        raise WorkflowError(WorkflowErrorCode.INVALID_ARGUMENT, (
            f"args are nested deeper than max_value_depth={max_depth} levels"))
    try:
        return json.dumps(args, ensure_ascii=True, allow_nan=False)
    except (TypeError, ValueError, RecursionError) as exc:
        raise WorkflowError(WorkflowErrorCode.INVALID_ARGUMENT,
                            f"args must be JSON data ({exc})") from None


def admit(request: object, *, default_provider: SubagentProvider,
          config: EngineConfig) -> Admission:
    """The start-time checks every engine makes, in the seam's order.

    Raises ``TypeError`` for something that is not a :class:`WorkflowStartRequest`, and
    :class:`~dsh_workflow.WorkflowError` for invalid meta (``META_INVALID``), a body that does
    not parse (``SCRIPT_PARSE``), a bad provider, total-agent cap or args (``INVALID_ARGUMENT``).
    Runs no script code and emits nothing.
    """
    if not isinstance(request, WorkflowStartRequest):
        raise TypeError("start() takes a WorkflowStartRequest")
    meta = parse_meta(request.meta)
    check_body(request.script)
    provider = resolve_provider(request.provider, default_provider)
    max_total = resolve_total_cap(request.max_total_agents, config.max_total_agents)
    return Admission(meta=meta, script=request.script, provider=provider,
                     max_total_agents=max_total, args_text=encode_args(request.args, config.max_value_depth),
                     parent=request.parent)


def hosted_run(admission: Admission, *, config: EngineConfig, events: EventHub,
               task_group: TaskGroup) -> HostedRun:
    """The host side of an admitted run (its runtime is attached by the engine)."""
    return HostedRun(run_id=str(uuid.uuid4()), meta=admission.meta, config=config,
                     provider=admission.provider, max_total_agents=admission.max_total_agents,
                     parent=admission.parent, events=events, task_group=task_group,
                     body_line_offset=body_line_offset(), body_header_chars=len(run_header(admission.script)))

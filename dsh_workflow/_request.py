"""The start request: what a caller hands ``engine.start()``."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

from ._meta import WorkflowMeta
from ._subagent import SubagentProvider

__all__ = ["WorkflowStartRequest"]


class WorkflowStartRequest(BaseModel):
    """One workflow to run.

    ``meta`` may be a :class:`WorkflowMeta` or a plain dict (validated by ``start()``, which
    reports every violation as ``META_INVALID``). ``args`` is any JSON value, copied into the
    script's ``args`` global (``None`` leaves the global ``undefined``). ``provider`` routes
    every child of this run (invisible to the script); ``max_total_agents`` may only lower
    the engine's ceiling; ``budget_tokens`` may only lower the engine's token budget
    (docs/embedding.md, "Budgets and usage"), ``budget_usd`` its dollar budget (docs/embedding.md,
    "Cost in money");
    ``parent`` is passed to every child request untouched. ``resume_from`` names an earlier run
    of the engine's store whose journal answers the calls that did not change (docs/durable-runs.md);
    ``rerun`` names calls of that run (by seq) that run live again instead of replaying (docs/durable-runs.md,
    "Runs under control").
    """

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    meta: WorkflowMeta | dict[str, Any] | Any
    script: str
    args: Any = None
    provider: SubagentProvider | None = None
    max_total_agents: int | None = None
    budget_tokens: int | None = None
    budget_usd: float | None = None
    resume_from: str | None = None
    parent: Any = None
    rerun: frozenset[int] = frozenset()

"""The engine conformance suite (``dsh_workflow.testing``) over the in-process QuickJS engine."""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from typing import ClassVar

from dsh_workflow import (
    AgentRegistry,
    EngineConfig,
    QuickJSEngine,
    SubagentProvider,
    WorkflowEngine,
)
from dsh_workflow.testing import EngineConformance


class TestQuickJSConformance(EngineConformance):
    # A confirmed engine bug is listed in ``known_failures`` (test name or id pattern -> reason)
    # and then runs as xfail(strict=True); the list is empty while the engine passes everything.
    known_failures: ClassVar[Mapping[str, str]] = {}

    def make_engine(self, config: EngineConfig, provider: SubagentProvider,
                    agents: AgentRegistry | None = None,
                    ) -> AbstractAsyncContextManager[WorkflowEngine]:
        return QuickJSEngine(config, provider=provider, agents=agents)

"""The engine conformance suite (``dsh_workflow.testing``) over ``SubprocessEngine``."""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from typing import ClassVar

from dsh_workflow import AgentRegistry, EngineConfig, SubagentProvider, WorkflowEngine
from dsh_workflow._engines.subprocess import SubprocessEngine
from dsh_workflow.testing import EngineConformance


class TestSubprocessConformance(EngineConformance):
    known_failures: ClassVar[Mapping[str, str]] = {}

    def make_engine(self, config: EngineConfig, provider: SubagentProvider,
                    agents: AgentRegistry | None = None,
                    ) -> AbstractAsyncContextManager[WorkflowEngine]:
        return SubprocessEngine(config, provider=provider, pool_size=1, agents=agents)

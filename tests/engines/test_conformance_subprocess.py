"""The engine conformance suite (``dsh_workflow.testing``) over ``SubprocessEngine``."""

from __future__ import annotations

from collections.abc import Mapping
from contextlib import AbstractAsyncContextManager
from typing import ClassVar

from dsh_workflow import AgentRegistry, EngineConfig, SubagentProvider, WorkflowEngine
from dsh_workflow._engines.subprocess import SubprocessEngine
from dsh_workflow.testing import EngineConformance


class TestSubprocessConformance(EngineConformance):
    """The kit on the configuration the command line uses (no warm pool: each run starts its
    sandbox process). The warm pool has its own tests (test_subprocess_engine.py), and the
    attack, budget, question and deep-answer suites run through it; here it would start a
    second process per engine that the engine's close then kills (a tenth of a second of CPU
    for each of the kit's ~780 tests)."""

    known_failures: ClassVar[Mapping[str, str]] = {}

    def make_engine(self, config: EngineConfig, provider: SubagentProvider,
                    agents: AgentRegistry | None = None,
                    ) -> AbstractAsyncContextManager[WorkflowEngine]:
        return SubprocessEngine(config, provider=provider, pool_size=0, agents=agents)

"""``EngineConformance``: the whole conformance suite as one class to subclass."""

from __future__ import annotations

from ._suite_base import ConformanceBase
from ._suite_boundary import BoundarySuite
from ._suite_combinators import CombinatorSuite
from ._suite_compat import CompatSuite
from ._suite_events import EventSuite
from ._suite_failure_aware import FailureAwareSuite
from ._suite_hooks import AgentSuite, NarrationSuite
from ._suite_lifecycle import LifecycleSuite
from ._suite_limits import LimitSuite
from ._suite_questions import QuestionSuite
from ._suite_sandbox import SandboxSuite
from ._suite_start import StartSuite

__all__ = ["EngineConformance"]


class EngineConformance(
    StartSuite,
    AgentSuite,
    NarrationSuite,
    CombinatorSuite,
    FailureAwareSuite,
    QuestionSuite,
    BoundarySuite,
    LimitSuite,
    LifecycleSuite,
    EventSuite,
    SandboxSuite,
    CompatSuite,
    ConformanceBase,
):
    """The engine conformance suite (docs/embedding.md and docs/scripts.md):
    subclass it in a test module.

    Override exactly one method, :meth:`make_engine`, which receives the
    :class:`~dsh_workflow.EngineConfig` and the default provider a test wants and returns an
    *async context manager* whose ``__aenter__`` yields a started
    :class:`~dsh_workflow.WorkflowEngine` (an engine that is its own context manager can simply
    be returned)::

        # tests/test_conformance_myengine.py
        from dsh_workflow.testing import EngineConformance

        class TestMyEngineConformance(EngineConformance):
            def make_engine(self, config, provider):
                return MyEngine(config, provider=provider)

    The class name must start with ``Test`` so pytest collects it. Every test is an
    ``async def`` marked ``@pytest.mark.anyio``; it runs on each backend the ``anyio_backend``
    fixture names (define it in ``conftest.py`` to run on both trio and asyncio; anyio's default
    is asyncio alone).

    Each test builds its own engine (small limits: ``slice_cpu_limit_s=0.3``,
    ``dispose_grace_s=0.5``), disposes every run it started even when an assertion fails, checks
    the event contract of every run, and fails if a thread whose name starts with
    ``dsh-workflow`` outlives it.

    Optional class attributes: ``base_config`` (settings every test starts from),
    ``margin_s`` (slack on "promptly" bounds, default 0.4 s; raise it for an engine with a
    slower transport), ``result_timeout_s``, ``thread_exit_wait_s`` (default 3 s; raise it on a
    heavily loaded machine), and ``known_failures``
    (test name -> reason; those tests run as ``xfail(strict=True)``, so a fix is noticed).

    The topic suites it is made of, each documenting what it checks: ``StartSuite``,
    ``AgentSuite``, ``NarrationSuite``, ``CombinatorSuite``, ``FailureAwareSuite``,
    ``QuestionSuite``, ``BoundarySuite``,
    ``LimitSuite``, ``LifecycleSuite``, ``EventSuite``, ``SandboxSuite``, ``CompatSuite``.
    """

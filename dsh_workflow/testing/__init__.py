"""The engine conformance kit: reusable tests and test doubles for ``WorkflowEngine``s.

* :class:`EngineConformance` — the conformance suite of the seam, the subagent seam and the
  script's view (docs/embedding.md and docs/scripts.md) as a class to subclass in a
  pytest module; override ``make_engine(self, config, provider)`` to return an async context
  manager yielding the engine under test (see the class docstring). Every built-in engine runs
  it. Importing it needs pytest (and anyio's pytest plugin, which anyio installs).
* Provider doubles, usable in any test and with no pytest dependency:
  :class:`FunctionProvider` (answers with a handler), :class:`GatedProvider` (children wait
  until the test releases them), :class:`FailingProvider` (raises), :class:`HangingProvider`
  (never returns, counts cancellations).
* :class:`AutoAnswer` — answers a run's questions (``ask()``, ``checkpoint()``) from a
  mapping of question texts or a callable of the ``Question``: ``answers=`` of an engine.
* :func:`check_run_events` — the event contract of docs/embedding.md for one run (raises
  :class:`EventContractError`, an ``AssertionError``); :func:`events_from_records` rebuilds
  events from the JSON lines ``dsh-workflow run --events`` writes. No pytest needed.

Example::

    from dsh_workflow import QuickJSEngine
    from dsh_workflow.testing import EngineConformance

    class TestQuickJSConformance(EngineConformance):
        def make_engine(self, config, provider):
            return QuickJSEngine(config, provider=provider)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._answers import AutoAnswer as AutoAnswer
from ._contract import EventContractError as EventContractError
from ._contract import check_run_events as check_run_events
from ._contract import events_from_records as events_from_records
from ._doubles import FailingProvider as FailingProvider
from ._doubles import FunctionProvider as FunctionProvider
from ._doubles import GatedProvider as GatedProvider
from ._doubles import HangingProvider as HangingProvider
from ._doubles import Reply as Reply

if TYPE_CHECKING:
    from ._suite import EngineConformance as EngineConformance

__all__ = [
    "AutoAnswer",
    "EngineConformance",
    "EventContractError",
    "FailingProvider",
    "FunctionProvider",
    "GatedProvider",
    "HangingProvider",
    "Reply",
    "check_run_events",
    "events_from_records",
]

_SUITE_MODULES = ("_suite", "_suite_base", "_suite_boundary", "_suite_combinators", "_suite_compat",
                  "_suite_events", "_suite_hooks", "_suite_lifecycle", "_suite_limits",
                  "_suite_sandbox", "_suite_start", "_suite_failure_aware",
                  "_suite_questions")


def __getattr__(name: str) -> Any:
    # The suite imports pytest; load it only when asked for, so the doubles need no pytest.
    if name == "EngineConformance":
        import pytest

        pytest.register_assert_rewrite(*(f"{__name__}.{module}" for module in _SUITE_MODULES))
        from ._suite import EngineConformance

        globals()["EngineConformance"] = EngineConformance
        return EngineConformance
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""dsh-workflow: run model-written JavaScript workflows in a sandboxed QuickJS engine.

The whole public API is importable from here; every other module is private.

The public names load lazily (PEP 562): ``import dsh_workflow`` costs almost nothing, and a
name's module is imported the first time the name is used, so a command line that only prints
its help never loads the engine, pydantic or httpx. Every name in :data:`__all__` resolves, and
each public class reads as ``dsh_workflow.<Name>``. The public names are written once, in the
``if TYPE_CHECKING:`` block below; ``__all__`` and the lazy loading are derived from it.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

# The one list of public names, one line each: ``from <its module> import <Name> as <Name>``.
# Type checkers read it as it is; at run time :func:`_homes` reads it from this file, on first
# use, and each name is imported from its module when it is first used.
if TYPE_CHECKING:
    from ._agents import AgentRegistry as AgentRegistry
    from ._config import EngineConfig as EngineConfig
    from ._config import RetryPolicy as RetryPolicy
    from ._engines.quickjs import QuickJSEngine as QuickJSEngine
    from ._engines.subprocess.engine import SubprocessEngine as SubprocessEngine
    from ._engines.subprocess.sandbox import SandboxPolicy as SandboxPolicy
    from ._errors import WorkflowError as WorkflowError
    from ._errors import WorkflowErrorCode as WorkflowErrorCode
    from ._events import AgentEnded as AgentEnded
    from ._events import AgentOutcome as AgentOutcome
    from ._events import AgentReplayed as AgentReplayed
    from ._events import AgentRetried as AgentRetried
    from ._events import AgentStarted as AgentStarted
    from ._events import EventHub as EventHub
    from ._events import LogEmitted as LogEmitted
    from ._events import PhaseStarted as PhaseStarted
    from ._events import QuestionAnswered as QuestionAnswered
    from ._events import QuestionAsked as QuestionAsked
    from ._events import RunInfo as RunInfo
    from ._events import WorkflowEnded as WorkflowEnded
    from ._events import WorkflowEvent as WorkflowEvent
    from ._events import WorkflowStarted as WorkflowStarted
    from ._failure import AgentFailure as AgentFailure
    from ._failure import ProviderUnavailable as ProviderUnavailable
    from ._library import LibraryProblem as LibraryProblem
    from ._library import SavedWorkflow as SavedWorkflow
    from ._library import WorkflowLibrary as WorkflowLibrary
    from ._meta import PhaseMeta as PhaseMeta
    from ._meta import WorkflowMeta as WorkflowMeta
    from ._providers import ClaudeCodeProvider as ClaudeCodeProvider
    from ._providers import CodexProvider as CodexProvider
    from ._providers import CommandProvider as CommandProvider
    from ._providers import EchoProvider as EchoProvider
    from ._providers import OpenAIProvider as OpenAIProvider
    from ._providers import RoutingProvider as RoutingProvider
    from ._questions import AnswerProvider as AnswerProvider
    from ._questions import Question as Question
    from ._request import WorkflowStartRequest as WorkflowStartRequest
    from ._result import StopReason as StopReason
    from ._result import WorkflowResult as WorkflowResult
    from ._run import RecordedResult as RecordedResult
    from ._run import WorkflowEngine as WorkflowEngine
    from ._run import WorkflowRun as WorkflowRun
    from ._store import CallRecord as CallRecord
    from ._store import JournalEntry as JournalEntry
    from ._store import RunRecord as RunRecord
    from ._store import RunStatus as RunStatus
    from ._store import RunStore as RunStore
    from ._store import RunStoreError as RunStoreError
    from ._store import SQLiteRunStore as SQLiteRunStore
    from ._store import StoredEvent as StoredEvent
    from ._subagent import AgentDefinition as AgentDefinition
    from ._subagent import ErrorKind as ErrorKind
    from ._subagent import ProviderInfo as ProviderInfo
    from ._subagent import SubagentProvider as SubagentProvider
    from ._subagent import SubagentRequest as SubagentRequest
    from ._subagent import SubagentResult as SubagentResult
    from ._subagent import Usage as Usage
    from ._tool import ToolCallCard as ToolCallCard
    from ._tool import ToolResult as ToolResult
    from ._tool import WorkflowTool as WorkflowTool

__version__ = "0.1.0"


_HOME: dict[str, str] | None = None  # public name -> its module, once read (see _homes)


def _homes() -> dict[str, str]:
    """Public name -> the private module that defines it (relative to this package), read once
    from this file (:func:`_read_homes`)."""
    global _HOME
    if _HOME is None:
        with open(__file__, encoding="utf-8") as source:
            _HOME = _read_homes(source)
    return _HOME


def _read_homes(lines: Iterable[str]) -> dict[str, str]:
    """The public names of the ``if TYPE_CHECKING:`` block in ``lines`` (this file's text), the
    one list of public names, with their modules.

    Raises ImportError when a line of that block is not ``from <module> import <Name> as
    <Name>`` (``tests/unit/test_exports.py`` checks the block the way a type checker reads it).
    """
    homes: dict[str, str] = {}
    lines = iter(lines)
    for line in lines:
        if line.startswith("if TYPE_CHECKING:"):
            break
    for line in lines:
        if not line.startswith("    ") and line.strip():
            break
        words = line.split("#", 1)[0].split()
        if not words:  # a blank or comment line
            continue
        if len(words) != 6 or words[0::2] != ["from", "import", "as"] or words[3] != words[5]:
            raise ImportError(f"{__name__}: a public name's line is not "
                              f"'from <module> import <Name> as <Name>': {line.strip()!r}")
        homes[words[3]] = words[1]
    return homes


def __getattr__(name: str) -> Any:
    """Load a public name on first use (PEP 562) and keep it, so later uses are plain lookups;
    ``__all__`` (every public name, sorted) is made on first use too."""
    if name == "__all__":
        names = sorted(_homes())
        globals()["__all__"] = names
        return names
    home = _homes().get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home, __name__), name)
    if isinstance(value, type) and value.__module__.startswith(f"{__name__}."):
        try:
            value.__module__ = __name__  # it reads as dsh_workflow.<Name>
        except (AttributeError, TypeError):  # pragma: no cover - a type that refuses
            pass
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_homes()))

"""dsh-workflow: run model-written JavaScript workflows in a sandboxed QuickJS engine.

The whole public API is importable from here; every other module is private.

The public names load lazily (PEP 562): ``import dsh_workflow`` costs almost nothing, and a
name's module is imported the first time the name is used, so a command line that only prints
its help never loads the engine, pydantic or httpx. Every name in :data:`__all__` resolves, and
each public class reads as ``dsh_workflow.<Name>``.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the same names, seen statically
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

#: public name -> the private module that defines it (relative to this package).
_HOME: dict[str, str] = {
    "AnswerProvider": "._questions",
    "AgentDefinition": "._subagent",
    "AgentEnded": "._events",
    "AgentFailure": "._failure",
    "AgentOutcome": "._events",
    "AgentRegistry": "._agents",
    "AgentReplayed": "._events",
    "AgentRetried": "._events",
    "AgentStarted": "._events",
    "CallRecord": "._store",
    "ClaudeCodeProvider": "._providers",
    "CodexProvider": "._providers",
    "CommandProvider": "._providers",
    "EchoProvider": "._providers",
    "EngineConfig": "._config",
    "ErrorKind": "._subagent",
    "EventHub": "._events",
    "JournalEntry": "._store",
    "LibraryProblem": "._library",
    "LogEmitted": "._events",
    "OpenAIProvider": "._providers",
    "PhaseMeta": "._meta",
    "PhaseStarted": "._events",
    "ProviderInfo": "._subagent",
    "ProviderUnavailable": "._failure",
    "Question": "._questions",
    "QuestionAnswered": "._events",
    "QuestionAsked": "._events",
    "QuickJSEngine": "._engines.quickjs",
    "RecordedResult": "._run",
    "RetryPolicy": "._config",
    "RoutingProvider": "._providers",
    "RunInfo": "._events",
    "RunRecord": "._store",
    "RunStatus": "._store",
    "RunStore": "._store",
    "RunStoreError": "._store",
    "SQLiteRunStore": "._store",
    "SandboxPolicy": "._engines.subprocess.sandbox",
    "SavedWorkflow": "._library",
    "StopReason": "._result",
    "StoredEvent": "._store",
    "SubagentProvider": "._subagent",
    "SubagentRequest": "._subagent",
    "SubagentResult": "._subagent",
    "SubprocessEngine": "._engines.subprocess.engine",
    "ToolCallCard": "._tool",
    "ToolResult": "._tool",
    "Usage": "._subagent",
    "WorkflowEnded": "._events",
    "WorkflowEngine": "._run",
    "WorkflowError": "._errors",
    "WorkflowErrorCode": "._errors",
    "WorkflowEvent": "._events",
    "WorkflowLibrary": "._library",
    "WorkflowMeta": "._meta",
    "WorkflowResult": "._result",
    "WorkflowRun": "._run",
    "WorkflowStartRequest": "._request",
    "WorkflowStarted": "._events",
    "WorkflowTool": "._tool",
}

__all__ = [
    "AgentDefinition",
    "AgentEnded",
    "AgentFailure",
    "AgentOutcome",
    "AgentRegistry",
    "AgentReplayed",
    "AgentRetried",
    "AgentStarted",
    "AnswerProvider",
    "CallRecord",
    "ClaudeCodeProvider",
    "CodexProvider",
    "CommandProvider",
    "EchoProvider",
    "EngineConfig",
    "ErrorKind",
    "EventHub",
    "JournalEntry",
    "LibraryProblem",
    "LogEmitted",
    "OpenAIProvider",
    "PhaseMeta",
    "PhaseStarted",
    "ProviderInfo",
    "ProviderUnavailable",
    "Question",
    "QuestionAnswered",
    "QuestionAsked",
    "QuickJSEngine",
    "RecordedResult",
    "RetryPolicy",
    "RoutingProvider",
    "RunInfo",
    "RunRecord",
    "RunStatus",
    "RunStore",
    "RunStoreError",
    "SQLiteRunStore",
    "SandboxPolicy",
    "SavedWorkflow",
    "StopReason",
    "StoredEvent",
    "SubagentProvider",
    "SubagentRequest",
    "SubagentResult",
    "SubprocessEngine",
    "ToolCallCard",
    "ToolResult",
    "Usage",
    "WorkflowEnded",
    "WorkflowEngine",
    "WorkflowError",
    "WorkflowErrorCode",
    "WorkflowEvent",
    "WorkflowLibrary",
    "WorkflowMeta",
    "WorkflowResult",
    "WorkflowRun",
    "WorkflowStartRequest",
    "WorkflowStarted",
    "WorkflowTool",
]

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """Load a public name on first use (PEP 562) and keep it, so later uses are plain lookups."""
    home = _HOME.get(name)
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
    return sorted(set(globals()) | set(__all__))

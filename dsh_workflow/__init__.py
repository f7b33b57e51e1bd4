"""dsh-workflow: run model-written JavaScript workflows in a sandboxed QuickJS engine.

The whole public API is importable from here; every other module is private.
"""

from ._agents import AgentRegistry as AgentRegistry
from ._config import EngineConfig as EngineConfig
from ._engines.quickjs import QuickJSEngine as QuickJSEngine
from ._engines.subprocess.engine import SubprocessEngine as SubprocessEngine
from ._engines.subprocess.sandbox import SandboxPolicy as SandboxPolicy
from ._errors import WorkflowError as WorkflowError
from ._errors import WorkflowErrorCode as WorkflowErrorCode
from ._events import AgentEnded as AgentEnded
from ._events import AgentOutcome as AgentOutcome
from ._events import AgentReplayed as AgentReplayed
from ._events import AgentStarted as AgentStarted
from ._events import EventHub as EventHub
from ._events import LogEmitted as LogEmitted
from ._events import PhaseStarted as PhaseStarted
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
from ._providers import CommandProvider as CommandProvider
from ._providers import EchoProvider as EchoProvider
from ._providers import OpenAIProvider as OpenAIProvider
from ._providers import RoutingProvider as RoutingProvider
from ._request import WorkflowStartRequest as WorkflowStartRequest
from ._result import StopReason as StopReason
from ._result import WorkflowResult as WorkflowResult
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
from ._subagent import SubagentProvider as SubagentProvider
from ._subagent import SubagentRequest as SubagentRequest
from ._subagent import SubagentResult as SubagentResult
from ._subagent import Usage as Usage
from ._tool import ToolCallCard as ToolCallCard
from ._tool import ToolResult as ToolResult
from ._tool import WorkflowTool as WorkflowTool

__all__ = [
    "AgentDefinition",
    "AgentEnded",
    "AgentFailure",
    "AgentOutcome",
    "AgentRegistry",
    "AgentReplayed",
    "AgentStarted",
    "CallRecord",
    "CommandProvider",
    "EchoProvider",
    "EngineConfig",
    "EventHub",
    "JournalEntry",
    "LibraryProblem",
    "LogEmitted",
    "OpenAIProvider",
    "PhaseMeta",
    "PhaseStarted",
    "ProviderUnavailable",
    "QuickJSEngine",
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


def _fix_module_names() -> None:
    for name in __all__:
        obj = globals()[name]
        if isinstance(obj, type) and obj.__module__.startswith("dsh_workflow."):
            try:
                obj.__module__ = "dsh_workflow"
            except (AttributeError, TypeError):  # pragma: no cover
                pass


_fix_module_names()
del _fix_module_names

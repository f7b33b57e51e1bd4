"""Distributed dispatch on Temporal (docs/temporal.md; extra ``dsh-workflow[temporal]``).

:class:`TemporalProvider` runs every ``agent()`` call as a Temporal activity on a task queue;
``dsh-workflow worker`` processes (or :class:`ChildActivity` in a worker of your own) run those
activities with a local provider.
"""

try:
    import temporalio as _temporalio  # noqa: F401 - fail early without the SDK
except ImportError as _missing:  # pragma: no cover - exercised only without the extra
    raise ImportError("dsh_workflow.integrations.temporal needs the Temporal SDK: "
                      "pip install 'dsh-workflow[temporal]'") from _missing

from ._activity import ChildActivity as ChildActivity
from ._provider import DEFAULT_ATTEMPT_TIMEOUT_S as DEFAULT_ATTEMPT_TIMEOUT_S
from ._provider import DEFAULT_RETRY_POLICY as DEFAULT_RETRY_POLICY
from ._provider import TemporalChildError as TemporalChildError
from ._provider import TemporalProvider as TemporalProvider
from ._provider import TemporalUnavailableError as TemporalUnavailableError
from ._tracing import TraceContext as TraceContext
from ._wire import CHILD_ACTIVITY as CHILD_ACTIVITY

__all__ = ["CHILD_ACTIVITY", "DEFAULT_ATTEMPT_TIMEOUT_S", "DEFAULT_RETRY_POLICY",
           "ChildActivity", "TemporalChildError", "TemporalProvider", "TemporalUnavailableError",
           "TraceContext"]

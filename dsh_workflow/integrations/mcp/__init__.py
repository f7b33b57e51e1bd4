"""MCP for dsh-workflow (extra ``dsh-workflow[mcp]``): the ``workflow`` tool served over MCP,
and ``agent()`` answered by the MCP client's own model through sampling.

- :func:`create_server` — a low-level ``mcp`` server offering the tool (``dsh-workflow mcp``
  builds one from its command-line options);
- :class:`SamplingProvider` — a :class:`~dsh_workflow.SubagentProvider` that sends each child
  to the client as ``sampling/createMessage``;
- :func:`require_bearer` — an ASGI wrapper that lets through only requests bearing the
  server's token (``Authorization: Bearer``), as ``dsh-workflow mcp --http`` serves.
"""

from .auth import require_bearer
from .notifications import ProgressNotifier
from .sampling import SamplingProvider, SamplingUnavailable, client_can_sample
from .server import CallContext, OpenCalls, SavedWorkflows, create_server

__all__ = ["CallContext", "OpenCalls", "ProgressNotifier", "SamplingProvider",
           "SamplingUnavailable", "SavedWorkflows", "client_can_sample",
           "create_server", "require_bearer"]

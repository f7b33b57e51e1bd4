"""The ``workflow`` tool layer: schema, description, result texts and render card over the seam.

The names load on first use (PEP 562), so a submodule another layer needs (the command line's
progress reads :mod:`.failures`) comes without the tool itself.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .tool import ToolCallCard as ToolCallCard
    from .tool import ToolResult as ToolResult
    from .tool import WorkflowTool as WorkflowTool
    from .tool import WorkflowToolArgs as WorkflowToolArgs

__all__ = ["ToolCallCard", "ToolResult", "WorkflowTool", "WorkflowToolArgs"]


def __getattr__(name: str) -> Any:
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(".tool", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

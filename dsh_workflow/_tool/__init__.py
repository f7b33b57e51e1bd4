"""The ``workflow`` tool layer: schema, description, result texts and render card over the seam."""

from __future__ import annotations

from .tool import ToolCallCard, ToolResult, WorkflowTool, WorkflowToolArgs

__all__ = ["ToolCallCard", "ToolResult", "WorkflowTool", "WorkflowToolArgs"]

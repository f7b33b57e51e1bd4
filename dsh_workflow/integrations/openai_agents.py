"""OpenAI Agents SDK integration (extra ``dsh-workflow[openai-agents]``).

Register the workflow tool with an agent::

    tool = WorkflowTool(engine)
    agent = Agent(name="assistant", tools=[workflow_tool(tool)])

Contract: :func:`workflow_tool` returns an ``agents.FunctionTool`` named as the tool
(``workflow``), with the tool's description and input schema (``strict_json_schema=False``:
the schema has optional members, which strict mode cannot express). A call passes the model's
JSON arguments to :meth:`WorkflowTool.execute` and returns its text — for refused arguments and
failed runs too, as the SDK expects of a tool error: a message the model reads and corrects
from.
"""

from __future__ import annotations

from typing import Any

from agents import FunctionTool
from agents.tool_context import ToolContext

from .._tool import WorkflowTool

__all__ = ["workflow_tool"]


def workflow_tool(tool: WorkflowTool) -> FunctionTool:
    """The workflow tool as an ``agents.FunctionTool`` (see the module docstring)."""

    async def invoke(context: ToolContext[Any], arguments: str) -> str:
        return (await tool.execute(arguments)).text

    return FunctionTool(name=tool.name, description=tool.description,
                        params_json_schema=tool.input_schema, on_invoke_tool=invoke,
                        strict_json_schema=False)

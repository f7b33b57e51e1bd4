"""LangChain integration (extra ``dsh-workflow[langchain]``).

Register the workflow tool with a chat model or agent::

    tool = WorkflowTool(engine)
    model = chat_model.bind_tools([workflow_tool(tool)])

Contract: :func:`workflow_tool` returns a langchain-core ``BaseTool`` named as the tool
(``workflow``), with the tool's description and input schema (``args_schema`` is the JSON
Schema itself). ``ainvoke`` runs :meth:`WorkflowTool.execute` and returns its text; a result
the tool marks as an error is raised as ``ToolException``, and the tool handles it
(``handle_tool_error=True``), so the model receives the error text as the tool message (with
``status="error"``). The tool is async only: the workflow runs on the engine's event loop, so
synchronous ``invoke`` raises ``NotImplementedError``, as langchain-core's own coroutine-only
tools do.
"""

from __future__ import annotations

from typing import Any

from langchain_core.tools import BaseTool, ToolException

from .._tool import WorkflowTool

__all__ = ["WorkflowLangChainTool", "workflow_tool"]


class WorkflowLangChainTool(BaseTool):
    """A langchain-core tool over one :class:`WorkflowTool` (build it with :func:`workflow_tool`)."""

    workflow: Any  # the WorkflowTool; Any keeps pydantic from inspecting it
    handle_tool_error: bool = True

    def _run(self, *args: Any, **kwargs: Any) -> str:
        raise NotImplementedError(f"the {self.name!r} tool is async only: use ainvoke()")

    async def _arun(self, *args: Any, **kwargs: Any) -> str:
        kwargs.pop("run_manager", None)
        result = await self.workflow.execute(kwargs)
        if result.is_error:
            raise ToolException(result.text)
        return str(result.text)


def workflow_tool(tool: WorkflowTool) -> WorkflowLangChainTool:
    """The workflow tool as a langchain-core ``BaseTool`` (see the module docstring)."""
    return WorkflowLangChainTool(name=tool.name, description=tool.description,
                                 args_schema=tool.input_schema, workflow=tool)

"""LangChain integration (extra ``dsh-workflow[langchain]``).

Register the workflow tool with a chat model or agent::

    tool = WorkflowTool(engine)
    model = chat_model.bind_tools([workflow_tool(tool)])

Contract: :func:`workflow_tool` returns a langchain-core ``BaseTool`` named as the tool
(``workflow``), with the tool's description and input schema (``args_schema`` is the JSON
Schema itself). ``ainvoke`` runs :meth:`WorkflowTool.execute` and returns its text; a result
the tool marks as an error is raised as ``ToolException``, and the tool handles it
(``handle_tool_error=True``), so the model receives the error text as the tool message (with
``status="error"``). The workflow runs on the engine's event loop: ``ainvoke`` there, or
synchronous ``invoke`` from a worker thread of that loop (``anyio.to_thread.run_sync``, or a
blocking portal's thread); anywhere else ``invoke`` raises ``NotImplementedError`` saying so.
"""

from __future__ import annotations

import functools
from typing import Any

import anyio.from_thread
from langchain_core.tools import BaseTool, ToolException

from .._tool import WorkflowTool

__all__ = ["WorkflowLangChainTool", "workflow_tool"]


class WorkflowLangChainTool(BaseTool):
    """A langchain-core tool over one :class:`WorkflowTool` (build it with :func:`workflow_tool`)."""

    workflow: Any  # the WorkflowTool; Any keeps pydantic from inspecting it
    handle_tool_error: bool = True

    def _run(self, *args: Any, **kwargs: Any) -> str:
        try:
            return anyio.from_thread.run(functools.partial(self._arun, *args, **kwargs))
        except RuntimeError as exc:
            if "worker thread" not in str(exc) and "event loop" not in str(exc):
                raise
        raise NotImplementedError(
            f"the {self.name!r} tool runs on its engine's event loop: use ainvoke() there, or "
            "invoke() from one of that loop's worker threads")

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

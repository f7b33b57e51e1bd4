"""pydantic-ai integration (extra ``dsh-workflow[pydantic-ai]``).

Register the workflow tool with a pydantic-ai agent::

    tool = WorkflowTool(engine)
    agent = Agent(model, tools=[workflow_tool(tool)])

Contract:

- :func:`workflow_tool` returns a ``pydantic_ai.Tool`` named as the tool (``workflow``), with the
  tool's description and input schema. A call runs :meth:`WorkflowTool.execute` and returns its
  text; a result the tool marks as an error is raised as ``ToolFailed`` with that text, so the
  model sees the failure (and the correction it names) without spending its retry budget.
- :class:`PydanticAIProvider` runs each ``agent()`` child as one run of a pydantic-ai agent, so
  children can have tools of their own. A schema call asks for structured output
  (``StructuredDict`` of the schema); the engine validates the value, so an invalid structured
  answer is ``null`` like any other. The agent definition's system prompt, if any, is passed as
  the run's instructions; ``max_output_tokens`` as the ``max_tokens`` model setting. The child's
  model is the agent's own (``request.model`` is not a pydantic-ai model name). Usage is the
  run's input/output tokens. A run that fails in an ordinary way (``AgentRunError``: the model
  misbehaved, a usage limit) is an ordinary child failure; anything else is raised.
"""

from __future__ import annotations

from typing import Any

from pydantic_ai import Agent, StructuredDict, Tool
from pydantic_ai.exceptions import AgentRunError, ToolFailed

from .._subagent import SubagentRequest, SubagentResult, Usage
from .._tool import WorkflowTool

__all__ = ["PydanticAIProvider", "workflow_tool"]


def workflow_tool(tool: WorkflowTool) -> Tool[Any]:
    """The workflow tool as a pydantic-ai ``Tool`` (see the module docstring)."""

    async def workflow(**arguments: Any) -> str:
        result = await tool.execute(arguments)
        if result.is_error:
            raise ToolFailed(result.text)
        return result.text

    return Tool.from_schema(workflow, name=tool.name, description=tool.description,
                            json_schema=tool.input_schema)


class PydanticAIProvider:
    """Runs each child as one run of ``agent`` (see the module docstring). ``deps`` is passed
    to every run."""

    def __init__(self, agent: Agent[Any, Any], *, deps: Any = None) -> None:
        self.agent = agent
        self.deps = deps

    async def run(self, request: SubagentRequest) -> SubagentResult:
        options: dict[str, Any] = {"deps": self.deps}
        if request.schema is not None:
            options["output_type"] = StructuredDict(request.schema, name="result")
        if request.agent is not None and request.agent.system_prompt:
            options["instructions"] = request.agent.system_prompt
        if request.max_output_tokens is not None:
            options["model_settings"] = {"max_tokens": request.max_output_tokens}
        try:
            result = await self.agent.run(request.prompt, **options)
        except AgentRunError as exc:
            return SubagentResult(stop_reason="error", error=f"{type(exc).__name__}: {exc}")
        used = result.usage
        usage = Usage(input_tokens=used.input_tokens or 0, output_tokens=used.output_tokens or 0)
        if request.schema is not None:
            return SubagentResult(stop_reason="completed", structured=dict(result.output),
                                  usage=usage)
        return SubagentResult(stop_reason="completed", text=str(result.output), usage=usage)

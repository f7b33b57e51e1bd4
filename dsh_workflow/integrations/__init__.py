"""Integrations with systems outside the project, each behind its own optional extra.

- :mod:`.mcp` — the ``workflow`` tool served over MCP, and :class:`~.mcp.SamplingProvider`,
  which answers ``agent()`` calls through the MCP client's own model (extra ``mcp``);
- :mod:`.pydantic_ai` — a pydantic-ai ``Tool`` and ``PydanticAIProvider`` (extra ``pydantic-ai``);
- :mod:`.openai_agents` — an ``agents.FunctionTool`` (extra ``openai-agents``);
- :mod:`.langchain` — a langchain-core ``BaseTool`` (extra ``langchain``);
- :mod:`.temporal` — ``TemporalProvider``: children dispatched across a fleet through Temporal
  (extra ``temporal``).

Each module imports its framework at import time; nothing here is imported by
``dsh_workflow`` itself, so the core never needs any of them.
"""

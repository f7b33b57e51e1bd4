"""Subagent providers shipped with dsh-workflow (private; re-exported by ``dsh_workflow``).

Each name loads its own module on first use (PEP 562), so using the echo provider never
imports httpx (the OpenAI-compatible provider's client).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .._schema_instance import minimal_instance as minimal_instance
    from .agent_cli import ClaudeCodeProvider as ClaudeCodeProvider
    from .agent_cli import CodexProvider as CodexProvider
    from .command import CommandProvider as CommandProvider
    from .echo import EchoProvider as EchoProvider
    from .openai import OpenAIProvider as OpenAIProvider
    from .routing import RoutingProvider as RoutingProvider

__all__ = ["ClaudeCodeProvider", "CodexProvider", "CommandProvider", "EchoProvider",
           "OpenAIProvider", "RoutingProvider", "minimal_instance"]

_HOME = {"ClaudeCodeProvider": ".agent_cli", "CodexProvider": ".agent_cli",
         "CommandProvider": ".command", "EchoProvider": ".echo", "minimal_instance": ".._schema_instance",
         "OpenAIProvider": ".openai", "RoutingProvider": ".routing"}


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))

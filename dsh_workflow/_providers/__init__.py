"""Subagent providers shipped with dsh-workflow (private; re-exported by ``dsh_workflow``)."""

from .agent_cli import ClaudeCodeProvider as ClaudeCodeProvider
from .agent_cli import CodexProvider as CodexProvider
from .command import CommandProvider as CommandProvider
from .echo import EchoProvider as EchoProvider
from .echo import minimal_instance as minimal_instance
from .openai import OpenAIProvider as OpenAIProvider
from .routing import RoutingProvider as RoutingProvider

__all__ = ["ClaudeCodeProvider", "CodexProvider", "CommandProvider", "EchoProvider",
           "OpenAIProvider", "RoutingProvider", "minimal_instance"]

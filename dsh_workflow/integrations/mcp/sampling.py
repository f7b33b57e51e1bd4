"""``SamplingProvider``: ``agent()`` answered by the MCP client's own model.

Contract:

- **One child, one conversation.** Each child is one ``sampling/createMessage`` request to the
  client (the prompt as the user message; the agent definition's system prompt, if any, as the
  system prompt; ``request.model`` as a model hint). The reply's text is the child's text.
- **Schema calls** ask for JSON only: the system prompt carries the schema and the rule "reply
  with one JSON value". The reply is parsed (one Markdown fence tolerated) and validated with
  the project's validator; an invalid value gets exactly one repair request (the conversation,
  the assistant's reply and a user message listing the violations); still invalid is an
  ordinary failure (``agent()`` → ``null``). The loop is the providers'
  (:mod:`dsh_workflow._providers.structured`), shared with the OpenAI-compatible provider.
- **Output limit.** ``max_tokens`` is ``request.max_output_tokens`` (the run's budget left) when
  set, else the provider's ``max_tokens`` — never more than the latter.
- **Usage.** MCP sampling reports no token counts, so ``usage`` is ``None``.
- **Failures.** A sampling request the client answers with an error (the user declined, the
  model failed) or with a reply that is not text is an ordinary failure
  (``stop_reason="error"``, ``error_kind="other"``: the protocol does not say more). A client
  that did not declare the sampling capability, or a
  connection with no channel back to the client, raises :class:`SamplingUnavailable` — an
  infrastructure fault the engine reports as fatal ``AGENT_FAILED`` with this message.
- **Concurrency** is the engine's ``max_concurrent_agents``; the provider adds no limit.
- **Cancellation** propagates unchanged: the SDK withdraws the pending sampling request with a
  ``notifications/cancelled`` to the client.
"""

from __future__ import annotations

import json
from typing import Any

from mcp import types
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPError, NoBackChannelError
from mcp.shared.message import ServerMessageMetadata

from ..._providers.structured import parse_with_one_repair, still_invalid
from ..._subagent import ProviderInfo, SubagentRequest, SubagentResult

__all__ = ["DEFAULT_MAX_TOKENS", "SamplingProvider", "SamplingUnavailable", "client_can_sample"]

#: Output tokens asked for when the run has no budget to pass on.
DEFAULT_MAX_TOKENS = 4096

NOT_SUPPORTED = ("--provider sampling needs an MCP client that supports sampling "
                 "(sampling/createMessage), and this client did not declare the sampling "
                 "capability: use a client with sampling, or another --provider")
NO_BACK_CHANNEL = ("--provider sampling cannot reach the client: this connection has no channel "
                   "for requests from the server to the client (sampling/createMessage)")

_JSON_RULE = ("Reply with exactly one JSON value that satisfies the JSON Schema below, and "
              "nothing else: no prose, no Markdown code fence.\n\nJSON Schema:\n")


class SamplingUnavailable(RuntimeError):
    """The client cannot answer sampling requests (no capability, or no back-channel)."""


def client_can_sample(session: ServerSession) -> bool:
    """Whether the client on ``session`` declared the sampling capability."""
    return session.check_client_capability(types.ClientCapabilities(sampling=types.SamplingCapability()))


class _Failed(Exception):
    """One sampling request failed in an ordinary way (an error reply, a non-text reply)."""


class SamplingProvider:
    """Runs each child as MCP sampling requests to the client on ``session``.

    ``related_request_id`` ties the sampling requests to the client request being served (the
    ``tools/call``), so that on streamable HTTP they travel on that request's stream.
    ``max_tokens`` (>= 1) caps each reply. See the module docstring for the contract.
    """

    #: What its children can do, in one line for the tool's description (a class attribute:
    #: the listing states it before any session exists).
    description = ("the MCP client's own model, through sampling: no tools, no files, it sees "
                   "only its prompt; an invalid structured answer is re-asked once, quoting "
                   "what was wrong")

    def __init__(self, session: ServerSession, *, related_request_id: types.RequestId | None = None,
                 max_tokens: int = DEFAULT_MAX_TOKENS) -> None:
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise ValueError(f"max_tokens must be an int >= 1, got {max_tokens!r}")
        self._session = session
        self._related = related_request_id
        self.max_tokens = max_tokens

    @property
    def info(self) -> ProviderInfo:
        """What this provider declares: kind ``sampling``, the identity its durable runs'
        journal keys have always used (its class's qualified name: the client's model is not
        known), no default model, and a record that cannot be rebuilt outside an MCP session
        (kind and ``max_tokens``)."""
        cls = type(self)
        return ProviderInfo(kind="sampling", identity=f"{cls.__module__}.{cls.__qualname__}",
                            default_model=None, description=self.description,
                            record={"kind": "sampling", "max_tokens": self.max_tokens})

    async def run(self, request: SubagentRequest) -> SubagentResult:
        """Answer one child; ordinary failures are returned, :class:`SamplingUnavailable` raised."""
        if not client_can_sample(self._session):
            raise SamplingUnavailable(NOT_SUPPORTED)
        schema = request.schema
        system = request.agent.system_prompt if request.agent is not None else ""
        if schema is not None:
            rule = _JSON_RULE + json.dumps(schema, indent=2, ensure_ascii=False)
            system = f"{system}\n\n{rule}" if system else rule
        limit = self.max_tokens
        if request.max_output_tokens is not None:
            limit = max(1, min(limit, request.max_output_tokens))
        messages = [_message("user", request.prompt)]

        async def ask_again(previous: str, repair: str) -> str:
            messages.extend([_message("assistant", previous), _message("user", repair)])
            return await self._sample(messages, system, request.model, limit)

        try:
            reply = await self._sample(messages, system or None, request.model, limit)
            if schema is None:
                return SubagentResult(stop_reason="completed", text=reply)
            answer = await parse_with_one_repair(reply, schema, ask_again)
        except _Failed as failed:
            return SubagentResult(stop_reason="error", error=str(failed), error_kind="other")
        if answer.violations:
            # The engine validates the parsed value (None: not JSON): kind invalid, with details.
            return SubagentResult(stop_reason="error", text=answer.text, structured=answer.value,
                                  error_kind="invalid_answer",
                                  error=still_invalid(answer.violations))
        return SubagentResult(stop_reason="completed", text=answer.text, structured=answer.value)

    async def _sample(self, messages: list[types.SamplingMessage], system: str | None,
                      model: str | None, max_tokens: int) -> str:
        preferences = (types.ModelPreferences(hints=[types.ModelHint(name=model)])
                       if model else None)
        request = types.CreateMessageRequest(params=types.CreateMessageRequestParams(
            messages=list(messages), system_prompt=system, max_tokens=max_tokens,
            model_preferences=preferences))
        try:
            result = await self._session.send_request(
                request, types.CreateMessageResult,
                metadata=ServerMessageMetadata(related_request_id=self._related))
        except NoBackChannelError:
            raise SamplingUnavailable(NO_BACK_CHANNEL) from None
        except MCPError as exc:
            raise _Failed(f"the client's sampling request failed: {exc.error.message}") from None
        content = result.content
        if not isinstance(content, types.TextContent):
            raise _Failed(f"the client's model replied with {content.type} content, not text")
        return content.text


def _message(role: Any, text: str) -> types.SamplingMessage:
    return types.SamplingMessage(role=role, content=types.TextContent(type="text", text=text))

"""The subagent seam: one request in, one result out."""

from __future__ import annotations

from typing import Any, Literal, Protocol, TypeGuard, runtime_checkable

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    SerializerFunctionWrapHandler,
    model_serializer,
)

__all__ = [
    "AgentDefinition",
    "Effort",
    "ErrorKind",
    "Isolation",
    "ProviderInfo",
    "SubagentProvider",
    "SubagentRequest",
    "SubagentResult",
    "Usage",
    "is_provider",
    "provider_description",
    "provider_identity",
    "provider_info",
]

Effort = Literal["low", "medium", "high", "xhigh", "max"]
"""How hard a child should think (Claude Code's ``effort`` option and its levels)."""

ErrorKind = Literal["auth", "not_found", "rate_limited", "overloaded", "limit", "server",
                    "network", "bad_request", "invalid_answer", "timeout", "other"]
"""What a provider's backend said when a child failed (``SubagentResult.error_kind``,
``AgentFailure.cause``): credentials refused (``auth``), no such model or endpoint
(``not_found``), too many requests (``rate_limited``), the backend busy (``overloaded``), a
usage or session limit with a reset time (``limit``, see ``SubagentResult.retry_at``), a server
error (``server``), no connection (``network``), a request the backend refused as malformed
(``bad_request``), an answer that is not what was asked (``invalid_answer``), the provider's own
time limit (``timeout``), anything else (``other``)."""

Isolation = Literal["worktree"]
"""Where a child works: ``"worktree"`` asks for a fresh git worktree of its own."""


class Usage(BaseModel):
    """Token usage of one child (or the sum over a run's children), when the provider knows it.

    ``input_tokens`` counts every input token, cached ones included (OpenAI's convention and the
    price library's); ``cache_read_tokens`` and ``cache_write_tokens`` are the parts of it read
    from / written to the provider's prompt cache (0 when not reported). ``cost_usd`` is the
    cost in US dollars: the provider's own figure when it reports one (an agent command line
    does), else the price of the tokens for the model that answered, from the ``genai-prices``
    data (:mod:`dsh_workflow._prices`); None when the model is unknown to that data — never a
    guess.

    In a sum (``a + b``, a run's usage), ``cost_usd`` is the sum of the known costs (None when
    none is known); a run counts the children whose cost was unknown in
    ``WorkflowResult.agents_unpriced`` (then its ``cost_usd`` is a lower bound).

    Dumped (``model_dump``, JSON), the cache counts appear only when not 0 and ``cost_usd`` only
    when known, so a usage without them reads ``{"input_tokens": N, "output_tokens": M}`` as it
    always did (events, stored results, the tool's ``data``).
    """

    model_config = ConfigDict(frozen=True)

    input_tokens: int = Field(0, ge=0)
    output_tokens: int = Field(0, ge=0)
    cache_read_tokens: int = Field(0, ge=0)
    cache_write_tokens: int = Field(0, ge=0)
    cost_usd: float | None = Field(None, ge=0, allow_inf_nan=False)

    @model_serializer(mode="wrap")
    def _dump_what_is_known(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        for key in ("cache_read_tokens", "cache_write_tokens"):
            if data.get(key) == 0:
                del data[key]
        if data.get("cost_usd", 0) is None:
            del data["cost_usd"]
        return data

    @property
    def total_tokens(self) -> int:
        """Input and output tokens together: what a budget counts."""
        return self.input_tokens + self.output_tokens

    @property
    def unpriced(self) -> bool:
        """True when tokens were reported but their cost is unknown."""
        return self.cost_usd is None and self.total_tokens > 0

    def __add__(self, other: Usage) -> Usage:
        costs = [u.cost_usd for u in (self, other) if u.cost_usd is not None]
        return Usage(input_tokens=self.input_tokens + other.input_tokens,
                     output_tokens=self.output_tokens + other.output_tokens,
                     cache_read_tokens=self.cache_read_tokens + other.cache_read_tokens,
                     cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
                     cost_usd=sum(costs) if costs else None)


class AgentDefinition(BaseModel):
    """A named kind of child (Claude Code's ``agentType``), read from an agent-definition file.

    ``system_prompt`` is the file's body (``""`` for the built-in ``general-purpose`` type);
    ``model`` applies when the call names none; ``tools`` is carried for providers that give
    children tools of their own (None: the file did not restrict them).
    """

    model_config = ConfigDict(frozen=True)

    name: str = Field(min_length=1)
    description: str = ""
    system_prompt: str = ""
    model: str | None = None
    tools: tuple[str, ...] | None = None


class SubagentRequest(BaseModel):
    """What one ``agent()`` call asks of a provider.

    ``label`` and ``phase`` are for display; ``schema`` (a JSON Schema, object-rooted) asks for
    a structured value; ``model`` and ``provider`` are the script's per-call overrides;
    ``parent`` is the opaque attribution of the start request; ``seq`` is 1-based per run.
    ``effort``, ``agent_type`` and ``isolation`` carry Claude Code's options of the same names
    (None when the call gave none); ``agent`` is the resolved definition of ``agent_type`` when
    the engine has an agent registry (its model already applied to ``model``).
    ``max_output_tokens`` is the run's token budget remaining when the child starts (None when
    the run has no budget): a provider that can limit a response's length should pass it on.
    """

    model_config = ConfigDict(frozen=True, populate_by_name=True, arbitrary_types_allowed=True)

    prompt: str
    label: str
    phase: str | None = None
    schema_: dict[str, Any] | None = Field(None, alias="schema")
    model: str | None = None
    provider: str | None = None
    parent: Any = None
    run_id: str
    seq: int
    max_output_tokens: int | None = None
    effort: Effort | None = None
    agent_type: str | None = None
    isolation: Isolation | None = None
    agent: AgentDefinition | None = None

    @property
    def schema(self) -> dict[str, Any] | None:  # type: ignore[override]  # BaseModel.schema() is deprecated
        return self.schema_


class SubagentResult(BaseModel):
    """A child's outcome.

    ``stop_reason`` is ``"completed"`` for success; any other word is an ordinary failure
    (the script sees ``null``). ``text`` is the answer; ``structured`` is the value for a
    schema call (validated by the engine against the schema).

    ``model`` is the model that answered, when the provider knows it (an HTTP response's
    ``model``, an agent CLI's ``modelUsage``): the engine prices the usage for it.
    ``error_kind`` classifies a failure (:data:`ErrorKind`; None when the provider did not say),
    and ``retry_at`` is when a ``limit`` resets (an aware datetime).
    """

    model_config = ConfigDict(frozen=True)

    stop_reason: str = "completed"
    text: str | None = None
    structured: Any = None
    error: str | None = None
    usage: Usage | None = None
    model: str | None = None
    error_kind: ErrorKind | None = None
    retry_at: AwareDatetime | None = None


class ProviderInfo(BaseModel):
    """What a provider declares about itself (``provider.info``): the one place every layer
    reads a provider from (docs/providers.md, "The provider contract").

    ``kind`` is the name ``--provider`` uses (``echo``, ``openai``, ``command``, ``claude``,
    ``codex``, ``routing``; a user's provider names its own); ``identity`` is the secret-free
    string every journal key of a durable run contains; ``default_model`` is the model a call
    that names none gets (None: unknown); ``description`` is the one line the tool's text shows
    about what children can do; ``record`` is JSON, secret-free, and holds everything needed to
    rebuild the provider for a resume; ``secrets`` are values to redact from every stored or
    shown text. Built with keyword arguments only; frozen.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: str = Field(min_length=1)
    identity: str = Field(min_length=1)
    default_model: str | None = None
    description: str | None = None
    record: dict[str, JsonValue] = Field(default_factory=dict)
    secrets: tuple[str, ...] = ()


@runtime_checkable
class SubagentProvider(Protocol):
    """Runs one child to completion.

    Cancellation: ``run`` is called inside the engine's cancel scopes, so cancellation arrives
    as the async backend's own cancellation exception; clean up and let it propagate.
    Returning a non-completed result is an ordinary child failure (``agent()`` → ``null``);
    raising is an infrastructure fault (fatal ``AGENT_FAILED``). The result's ``error_kind``
    lets the engine decide: it retries ``rate_limited``, ``overloaded``, ``server`` and
    ``network`` (``EngineConfig.retry``) and ends the run on ``auth`` and ``not_found``; a
    provider does not retry by itself.
    """

    async def run(self, request: SubagentRequest) -> SubagentResult: ...


def is_provider(value: object) -> TypeGuard[SubagentProvider]:
    """Whether ``value`` can answer ``agent()`` calls: it has a callable ``run`` (the check an
    engine makes of the provider it is handed, and of a request's). Beyond ``run``, a
    provider is read only through :func:`provider_info`."""
    return isinstance(value, SubagentProvider) and callable(value.run)


def provider_info(provider: object) -> ProviderInfo:
    """``provider.info`` when the provider declares one; else a default derived from its class
    (a user's duck-typed provider): kind and identity its class's qualified name (or the
    ``identity`` and ``description`` strings it has, the contract before ``ProviderInfo``),
    no default model, no record beyond its kind, no secrets. The one place a provider's
    attributes are read."""
    info = getattr(provider, "info", None)
    if isinstance(info, ProviderInfo):
        return info
    cls = type(provider)
    name = f"{cls.__module__}.{cls.__qualname__}"
    identity = getattr(provider, "identity", None)
    description = getattr(provider, "description", None)
    return ProviderInfo(
        kind=name, identity=identity if isinstance(identity, str) and identity else name,
        description=description if isinstance(description, str) and description.strip() else None,
        record={"kind": name})


def provider_identity(provider: object) -> str:
    """What answers a provider's calls, for durable runs' journal keys (docs/durable-runs.md):
    ``provider_info(provider).identity``."""
    return provider_info(provider).identity


#: Longest provider description the tool's text keeps (it is sent with every request).
MAX_DESCRIPTION_CHARS = 240


def provider_description(provider: object) -> str | None:
    """What a provider's children can do, in one line for the tool's description (docs/embedding.md, "The
    model-facing tool"): its ``description`` string (the built-in providers have one: the
    model, tools or none, files or none), newlines folded and cut at
    :data:`MAX_DESCRIPTION_CHARS`; None when it has none."""
    text = provider_info(provider).description
    if not isinstance(text, str) or not text.strip():
        return None
    line = " ".join(text.split())
    return line if len(line) <= MAX_DESCRIPTION_CHARS else line[:MAX_DESCRIPTION_CHARS - 1] + "…"

"""A subagent provider for any OpenAI-compatible chat completions endpoint.

Contract of :class:`OpenAIProvider`:

- **Lifecycle.** An async context manager owning one shared ``httpx.AsyncClient``. Its
  connection pool is unbounded by default (``max_connections=None``): how many children run at
  once is the engine's ``max_concurrent_agents``, and the provider must not throttle below it.
  ``max_connections=N`` caps the pool (e.g. for a server that allows N connections); a request
  then waits for a free connection without that wait counting against ``timeout_s``, which
  bounds each connect, write and read. The client is closed on exit. ``run`` outside the ``async with``
  block raises ``RuntimeError`` (a programming error, which the engine reports as fatal
  ``AGENT_FAILED``); a provider is entered once.
- **Configuration.** Each value comes from its argument, else from the environment:
  base URL ``DSH_WORKFLOW_OPENAI_BASE_URL`` then ``OPENAI_BASE_URL`` (default
  ``https://api.openai.com/v1``), key ``DSH_WORKFLOW_OPENAI_API_KEY`` then ``OPENAI_API_KEY``
  (optional: without one no ``Authorization`` header is sent), model
  ``DSH_WORKFLOW_OPENAI_MODEL`` then ``OPENAI_MODEL``. Empty variables count as unset. A missing
  model or an invalid setting raises ``ValueError`` at construction. ``request.model`` overrides
  the model for one call.
- **One child.** ``POST {base_url}/chat/completions`` with the prompt as the user message,
  preceded by a system message holding the agent definition's system prompt when the request
  carries a definition with a non-empty one (``request.agent``; the definition's model reaches
  the provider as ``request.model``, already applied by the engine). The reply's message
  content is the text. With ``request.schema`` the request carries a
  ``json_schema`` response format (``strict: false``, so any JSON Schema is accepted); the reply
  is parsed as JSON (one Markdown fence tolerated) and validated with the project's validator.
  An invalid value gets exactly one repair request (the conversation plus the assistant's reply
  and a user message quoting the violations); still invalid is an ordinary failure (the
  parse-and-repair loop is :mod:`.structured`'s, shared with MCP sampling).
- **Effort.** ``request.effort`` is sent as ``reasoning_effort``: ``low``, ``medium`` and
  ``high`` as they are, ``xhigh`` and ``max`` as ``high`` (the highest value the API accepts). When the
  endpoint rejects it — HTTP 400 (or 422) whose body names ``reasoning_effort`` — the request is
  retried once without it, and the provider stops sending it for that model (as the request's
  model string) for the rest of its life.
- **Output limit.** ``request.max_output_tokens`` (the run's token budget left when the child
  starts; None without a budget) is sent as ``max_tokens``, the output-token limit every
  OpenAI-compatible server knows; a repair request gets what the first answer left of it. An
  endpoint that rejects ``max_tokens`` (HTTP 400/422 naming it, as OpenAI's reasoning models
  do) gets the request again with ``max_completion_tokens`` instead, and that model keeps
  getting the newer name.
- **Ignored.** ``isolation`` (there is no filesystem to isolate: the child only talks to the
  API) and ``agent.tools`` (children get no tools).
- **No retries of its own.** Each HTTP request is made once: the engine is the one place that
  retries (``EngineConfig.retry``, docs/providers.md, "Faults and retries"). The constructor
  still accepts ``max_retries``, ``backoff_base_s`` and ``backoff_max_s`` (checked as before) so
  existing code keeps working; they are deprecated and have no effect.
- **Never raises for a failed child.** Every HTTP, transport, protocol or validation failure of
  one request is returned as ``SubagentResult(stop_reason="error", error=..., error_kind=...)``;
  HTTP failures name the status and the server's error message (``error.message`` of the JSON
  body), network failures the error. The API key never appears in an error text
  (``_failure.redact``). ``error_kind`` classifies what the endpoint said: HTTP 401/403
  ``auth`` (``the provider refused its credentials: 401 <message> (<base URL>)``), 404
  ``not_found`` (naming the model), 429 ``rate_limited`` (``limit`` when the body says the quota
  is spent: ``insufficient_quota``), with a ``Retry-After`` (or ``retry-after-ms``) header as
  ``retry_at``, 503 and 529 ``overloaded``, other 5xx ``server``, 400/422 and other 4xx
  ``bad_request``, a connection that cannot be made or breaks ``network`` (``the endpoint is
  unreachable: ...``), a read or write timeout ``timeout``, an answer without text ``other``. A
  structured answer still invalid after its one repair is ``invalid_answer`` with the parsed
  value as ``structured`` (None when it is not JSON) and the reply as ``text``: the engine
  validates it and fails the child with kind ``invalid`` and the validator's details.
  ``usage`` sums ``prompt_tokens``/``completion_tokens`` (and
  ``prompt_tokens_details.cached_tokens`` as ``cache_read_tokens``) over every answered call of
  the child (``None`` when the server reports none); the result's ``model`` is the response's
  ``model`` (the model that answered), which the engine prices the usage for.
- **Cancellation** propagates unchanged; httpx closes the in-flight connection at once, so the
  server sees the request abandoned.
"""

from __future__ import annotations

import email.utils
import json
import math
import os
import time
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Self
from urllib.parse import parse_qsl, urlsplit

import httpx

from .._depth import loads_bounded
from .._failure import argv_secrets, redact
from .._subagent import ErrorKind, ProviderInfo, SubagentRequest, SubagentResult, Usage
from .._telemetry import trace_headers
from .structured import parse_with_one_repair, still_invalid

__all__ = ["OpenAIProvider"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
_BROKEN_CONNECTION = (httpx.ConnectTimeout, httpx.NetworkError, httpx.RemoteProtocolError)
_MAX_SERVER_MESSAGE = 500
_EFFORT_PARAMETER = "reasoning_effort"
_LIMIT_PARAMETER = "max_tokens"
_NEW_LIMIT_PARAMETER = "max_completion_tokens"
_LONGEST_RETRY_AFTER_S = 366 * 86400.0  # a longer Retry-After is read as a year: still a limit
_REASONING_EFFORT = {"low": "low", "medium": "medium", "high": "high", "xhigh": "high",
                     "max": "high"}


class _CallFailed(Exception):
    """Internal: one child's HTTP exchange failed (``args[0]``), classified as ``kind``."""

    def __init__(self, message: str, kind: ErrorKind = "other",
                 retry_at: datetime | None = None) -> None:
        super().__init__(message)
        self.kind: ErrorKind = kind
        self.retry_at = retry_at


class _Rejected(_CallFailed):
    """Internal: the server answered the request with an error status."""

    def __init__(self, message: str, status: int, body: str, kind: ErrorKind,
                 retry_at: datetime | None = None) -> None:
        super().__init__(message, kind, retry_at)
        self.status = status
        self.body = body

    def names_parameter(self, name: str) -> bool:
        return self.status in (400, 422) and name in self.body


class _ChildUsage:
    """Token usage summed over the calls of one child, and the model that answered."""

    def __init__(self) -> None:
        self.input = self.output = self.cached = 0
        self.seen = False
        self.model: str | None = None  # the last response's ``model``

    def add(self, usage: Any, model: Any = None) -> None:
        if isinstance(model, str) and model.strip():
            self.model = model.strip()[:200]
        if not isinstance(usage, dict):
            return
        for key, attr in (("prompt_tokens", "input"), ("completion_tokens", "output")):
            value = usage.get(key)
            if _is_count(value):
                setattr(self, attr, getattr(self, attr) + value)
                self.seen = True
        details = usage.get("prompt_tokens_details")
        cached = details.get("cached_tokens") if isinstance(details, dict) else None
        if isinstance(cached, int) and _is_count(cached):
            self.cached += cached

    def usage(self) -> Usage | None:
        if not self.seen:
            return None
        return Usage(input_tokens=self.input, output_tokens=self.output,
                     cache_read_tokens=min(self.cached, self.input))


def _is_count(value: object) -> bool:
    """A token count as JSON carries it: a non-negative integer (not a boolean)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _env(*names: str) -> str | None:
    for name in names:
        value = os.environ.get(name)
        if value:
            return value
    return None


class OpenAIProvider:
    """Runs each child as one chat completion (plus at most one repair) on an OpenAI-compatible API.

    See the module docstring for configuration, retries, failures and cancellation.
    """

    def __init__(
        self,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        model: str | None = None,
        max_retries: int = 4,
        timeout_s: float = 120.0,
        max_connections: int | None = None,
        backoff_base_s: float = 0.5,
        backoff_max_s: float = 30.0,
        extra_headers: Mapping[str, str] | None = None,
    ) -> None:
        base = base_url or _env("DSH_WORKFLOW_OPENAI_BASE_URL", "OPENAI_BASE_URL") or DEFAULT_BASE_URL
        resolved_model = model or _env("DSH_WORKFLOW_OPENAI_MODEL", "OPENAI_MODEL")
        if not resolved_model:
            raise ValueError(
                "OpenAIProvider needs a model: pass model=... or set "
                "DSH_WORKFLOW_OPENAI_MODEL or OPENAI_MODEL"
            )
        try:
            scheme = httpx.URL(base).scheme
        except httpx.InvalidURL as exc:
            raise ValueError(f"invalid base_url {base!r}: {exc}") from None
        if scheme not in ("http", "https"):
            raise ValueError(f"base_url must be an http(s) URL, got {base!r}")
        if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
            raise ValueError(f"max_retries must be an integer >= 0, got {max_retries!r}")
        if max_connections is not None and (
            isinstance(max_connections, bool) or not isinstance(max_connections, int) or max_connections < 1
        ):
            raise ValueError(f"max_connections must be an integer >= 1 or None, got {max_connections!r}")
        for name, value in (("timeout_s", timeout_s), ("backoff_max_s", backoff_max_s)):
            if not (value > 0 and math.isfinite(value)):
                raise ValueError(f"{name} must be a positive number, got {value!r}")
        if not (backoff_base_s >= 0 and math.isfinite(backoff_base_s)):
            raise ValueError(f"backoff_base_s must be a number >= 0, got {backoff_base_s!r}")
        self.base_url = base.rstrip("/")
        self.model = resolved_model
        self.max_retries = max_retries  # deprecated, no effect: the engine retries
        self.timeout_s = float(timeout_s)
        self.max_connections = max_connections
        self.backoff_base_s = float(backoff_base_s)
        self.backoff_max_s = float(backoff_max_s)
        self._url = f"{self.base_url}/chat/completions"
        self._headers = {"Accept": "application/json", "Content-Type": "application/json"}
        key = api_key or _env("DSH_WORKFLOW_OPENAI_API_KEY", "OPENAI_API_KEY")
        if key:
            self._headers["Authorization"] = f"Bearer {key}"
        self._headers.update(extra_headers or {})
        # redacted from every error text: the key, and every header value or URL query value
        # whose name says it carries one (``api-key: ...``, ``?key=...``)
        named = [*(extra_headers or {}).items(), *parse_qsl(urlsplit(self.base_url).query)]
        self._secrets = (key, *argv_secrets(f"--{name}={value}" for name, value in named))
        self._client: httpx.AsyncClient | None = None
        self._entered = False
        self._effort_rejected: set[str] = set()  # models whose endpoint refused reasoning_effort
        self._limit_renamed: set[str] = set()  # models that take max_completion_tokens instead

    @property
    def identity(self) -> str:
        """What answers this provider's calls, for durable runs' journal keys (docs/durable-runs.md): the
        endpoint (credentials redacted) and the default model (a call's own model is part of
        its key too)."""
        return f"openai {redact(self.base_url, self._secrets)} {self.model}"

    @property
    def description(self) -> str:
        """What its children can do, in one line (docs/embedding.md, "The model-facing tool")."""
        return (f"model {self.model} (opts.model picks another), one chat completion per child: "
                "no tools, no files, it sees only its prompt; an invalid structured answer is "
                "re-asked once, quoting what was wrong")

    @property
    def info(self) -> ProviderInfo:
        """What this provider declares: kind ``openai``, its model as the default, the endpoint
        (credentials redacted) and model as its record, and the API key and secret header
        values as its secrets."""
        return ProviderInfo(kind="openai", identity=self.identity, default_model=self.model,
                            description=self.description,
                            record={"kind": "openai",
                                    "base_url": redact(self.base_url, self._secrets),
                                    "model": self.model},
                            secrets=tuple(key for key in self._secrets if key))

    def __repr__(self) -> str:
        return f"OpenAIProvider(base_url={self.base_url!r}, model={self.model!r})"

    async def __aenter__(self) -> Self:
        if self._entered:
            raise RuntimeError("an OpenAIProvider can be entered only once")
        self._entered = True
        limits = httpx.Limits(
            max_connections=self.max_connections, max_keepalive_connections=self.max_connections
        )
        # Waiting for a pooled connection is throttling, not slowness of the server: no pool timeout.
        timeout = httpx.Timeout(self.timeout_s, pool=None)
        self._client = httpx.AsyncClient(headers=self._headers, timeout=timeout, limits=limits)
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    async def run(self, request: SubagentRequest) -> SubagentResult:
        """Answer one child; failures are returned, never raised (see the module docstring).
        The result names the model that answered (the engine prices its usage)."""
        client = self._client
        if client is None:
            raise RuntimeError("OpenAIProvider.run() called outside its 'async with' block")
        model = request.model or self.model
        spent = _ChildUsage()
        result = await self._answer(client, request, model, spent)
        if spent.model is None:
            return result
        return result.model_copy(update={"model": spent.model})

    async def _answer(self, client: httpx.AsyncClient, request: SubagentRequest,
                      model: str, spent: _ChildUsage) -> SubagentResult:
        schema = request.schema
        messages: list[dict[str, str]] = []
        if request.agent is not None and request.agent.system_prompt:
            messages.append({"role": "system", "content": request.agent.system_prompt})
        messages.append({"role": "user", "content": request.prompt})
        effort = _REASONING_EFFORT[request.effort] if request.effort is not None else None
        limit = request.max_output_tokens

        async def ask_again(previous: str, repair: str) -> str:
            messages.append({"role": "assistant", "content": previous})
            messages.append({"role": "user", "content": repair})
            left = None if limit is None else max(1, limit - spent.output)
            return await self._complete(client, model, messages, schema, effort, spent, left)

        try:
            reply = await self._complete(client, model, messages, schema, effort, spent, limit)
            if schema is None:
                return SubagentResult(stop_reason="completed", text=reply, usage=spent.usage())
            answer = await parse_with_one_repair(reply, schema, ask_again)
        except _CallFailed as failed:
            return SubagentResult(stop_reason="error", error=redact(str(failed), self._secrets),
                                  usage=spent.usage(), error_kind=failed.kind,
                                  retry_at=failed.retry_at)
        if answer.violations:
            return SubagentResult(
                stop_reason="error",
                text=answer.text,
                structured=answer.value,
                error_kind="invalid_answer",
                error=redact(still_invalid(answer.violations)
                             + f" (the last answer began: {answer.text.strip()[:200]!r})",
                             self._secrets),
                usage=spent.usage(),
            )
        return SubagentResult(stop_reason="completed", text=answer.text, structured=answer.value,
                              usage=spent.usage())

    async def _complete(
        self,
        client: httpx.AsyncClient,
        model: str,
        messages: list[dict[str, str]],
        schema: dict[str, Any] | None,
        effort: str | None,
        spent: _ChildUsage,
        limit: int | None = None,
    ) -> str:
        body: dict[str, Any] = {"model": model, "messages": messages}
        if limit is not None:
            renamed = model in self._limit_renamed
            body[_NEW_LIMIT_PARAMETER if renamed else _LIMIT_PARAMETER] = max(1, limit)
        if schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "result", "schema": schema, "strict": False},
            }
        if effort is not None and model not in self._effort_rejected:
            body[_EFFORT_PARAMETER] = effort
        data = await self._post_adapting(client, model, body)
        spent.add(data.get("usage"), data.get("model"))
        try:
            choice = data["choices"][0]
            message = choice["message"]
        except (KeyError, IndexError, TypeError):
            raise _CallFailed(f"malformed response from {self._url}: no choices[0].message") from None
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, list):  # some servers answer with content parts
            parts = [p.get("text") for p in content if isinstance(p, dict)]
            content = "".join(p for p in parts if isinstance(p, str))
        if isinstance(content, str):
            return content
        if isinstance(message, dict) and message.get("refusal"):
            raise _CallFailed(f"the model refused: {message['refusal']}")
        finish = choice.get("finish_reason") if isinstance(choice, dict) else None
        raise _CallFailed(f"the response has no text content (finish_reason={finish!r})")

    async def _post_adapting(self, client: httpx.AsyncClient, model: str,
                             body: dict[str, Any]) -> dict[str, Any]:
        """POST ``body``; when the endpoint rejects a parameter it may not know
        (``reasoning_effort``, ``max_tokens``), adapt the body once per parameter and remember
        it for ``model``."""
        for _ in range(3):
            try:
                return await self._post(client, json.dumps(body).encode("ascii"))
            except _Rejected as rejected:
                if _EFFORT_PARAMETER in body and rejected.names_parameter(_EFFORT_PARAMETER):
                    self._effort_rejected.add(model)
                    del body[_EFFORT_PARAMETER]
                elif _LIMIT_PARAMETER in body and rejected.names_parameter(_LIMIT_PARAMETER):
                    self._limit_renamed.add(model)
                    body[_NEW_LIMIT_PARAMETER] = body.pop(_LIMIT_PARAMETER)
                else:
                    raise self._named(rejected, model)
        try:
            return await self._post(client, json.dumps(body).encode("ascii"))
        except _Rejected as rejected:
            raise self._named(rejected, model) from None

    def _named(self, rejected: _Rejected, model: str) -> _Rejected:
        """A refusal every later child would meet too (credentials refused, the model
        unknown) in words that say so; any other refusal as it is."""
        message = _server_message_of(rejected.body) or "(no message)"
        if rejected.kind == "auth":
            text = (f"the provider refused its credentials: {rejected.status} {message} "
                    f"({self.base_url})")
        elif rejected.kind == "not_found":
            text = (f"the endpoint does not know the model {model!r}: 404 {message} "
                    f"({self.base_url})")
        else:
            return rejected
        return _Rejected(text, rejected.status, rejected.body, rejected.kind)

    async def _post(self, client: httpx.AsyncClient, body: bytes) -> dict[str, Any]:
        """POST once; returns the decoded JSON object or raises ``_CallFailed`` classified
        (the module docstring)."""
        try:
            # the child's agent span, when the engine traces (SPEC §27)
            response = await client.post(self._url, content=body, headers=trace_headers())
        except _BROKEN_CONNECTION as exc:
            raise _CallFailed(f"the endpoint is unreachable: {type(exc).__name__} talking to "
                              f"{self._url}: {exc or 'no detail'}", "network") from None
        except httpx.TimeoutException as exc:
            raise _CallFailed(f"{type(exc).__name__} talking to {self._url}: "
                              f"{exc or 'no detail'}", "timeout") from None
        except httpx.HTTPError as exc:
            raise _CallFailed(f"{type(exc).__name__} talking to {self._url}: {exc}") from None
        status = response.status_code
        if 200 <= status < 300:
            return self._decode(response)
        problem = f"HTTP {status} from {self._url}: {_server_message(response)}"
        seconds = _retry_after(response.headers)
        retry_at = None if seconds is None else \
            datetime.now(UTC) + timedelta(seconds=min(seconds, _LONGEST_RETRY_AFTER_S))
        raise _Rejected(problem, status, response.text, _status_kind(status, response.text),
                        retry_at)

    def _decode(self, response: httpx.Response) -> dict[str, Any]:
        try:
            data = loads_bounded(response.content)
        except ValueError:
            raise _CallFailed(f"the response from {self._url} is not JSON: {response.text[:200]!r}") from None
        if not isinstance(data, dict):
            raise _CallFailed(f"the response from {self._url} is not a JSON object")
        return data



def _status_kind(status: int, body: str) -> ErrorKind:
    """What an HTTP error status (and its body) says (the module docstring's table)."""
    if status in (401, 403):
        return "auth"
    if status == 404:
        return "not_found"
    if status == 429:
        return "limit" if "insufficient_quota" in body else "rate_limited"
    if status in (503, 529):
        return "overloaded"
    if status >= 500:
        return "server"
    if status == 408:
        return "timeout"
    return "bad_request" if status >= 400 else "other"


def _server_message_of(body: str) -> str | None:
    """The error message of a JSON error body: OpenAI's ``{"error": {"message": ...}}``, a
    ``{"error": "..."}`` or ``{"message": ...}``; else the body's start (None when empty)."""
    try:
        data = loads_bounded(body)
    except ValueError:
        data = None
    if isinstance(data, dict):
        error = data.get("error", data)
        message = error.get("message") if isinstance(error, dict) else None
        if isinstance(message, str):
            return message[:_MAX_SERVER_MESSAGE]
        if isinstance(error, str):
            return error[:_MAX_SERVER_MESSAGE]
    text = body.strip()
    return text[:_MAX_SERVER_MESSAGE] if text else None


def _server_message(response: httpx.Response) -> str:
    """The server's error message (:func:`_server_message_of`), or the status's phrase."""
    return _server_message_of(response.text) or response.reason_phrase or "(empty body)"


def _retry_after(headers: httpx.Headers) -> float | None:
    """Seconds asked by ``retry-after-ms`` or ``Retry-After`` (seconds or HTTP date), if any."""
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            seconds = email.utils.parsedate_to_datetime(value).timestamp() - time.time()
        except (TypeError, ValueError, IndexError):
            return None
    return max(0.0, seconds) if math.isfinite(seconds) else None

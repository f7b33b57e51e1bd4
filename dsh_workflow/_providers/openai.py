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
- **Retries.** Connection errors, timeouts, HTTP 429 and 5xx are retried up to ``max_retries``
  times with exponential backoff and jitter (``backoff_base_s * 2**n``, at most
  ``backoff_max_s``); a ``Retry-After`` (or ``retry-after-ms``) header is honoured, capped by
  ``backoff_max_s``. Other statuses are not retried.
- **Never raises for a failed child.** Every HTTP, transport, protocol or validation failure of
  one request is returned as ``SubagentResult(stop_reason="error", error=...)``; HTTP failures
  name the status and the server's error message (``error.message`` of the JSON body), network
  failures the error, and a schema repair that failed what was wrong with the last answer.
  The API key never appears in an error text (``_failure.redact``).
- **Raises** :class:`~dsh_workflow.ProviderUnavailable` for faults every later child would hit
  too (the engine ends the run at once with fatal ``AGENT_FAILED``): HTTP 401/403 (``the
  provider refused its credentials: 401 <message> (<base URL>)``), HTTP 404 (naming the
  model), and an endpoint that cannot be connected to after the retries (connection refused,
  DNS failure). ``usage`` sums ``prompt_tokens``/``completion_tokens`` (and
  ``prompt_tokens_details.cached_tokens`` as ``cache_read_tokens``) over every answered call of
  the child (``None`` when the server reports none), priced for the call's model through
  ``genai-prices`` (``cost_usd`` None when the price data does not know the model).
- **Cancellation** propagates unchanged; httpx closes the in-flight connection at once, so the
  server sees the request abandoned, and a pending backoff sleep ends immediately.
"""

from __future__ import annotations

import email.utils
import json
import math
import os
import random
import time
from collections.abc import Mapping
from typing import Any, Self

import anyio
import httpx

from .._failure import ProviderUnavailable, redact
from .._prices import priced_async
from .._subagent import ProviderInfo, SubagentRequest, SubagentResult, Usage
from .structured import parse_with_one_repair, still_invalid

__all__ = ["OpenAIProvider"]

DEFAULT_BASE_URL = "https://api.openai.com/v1"
_RETRYABLE_TRANSPORT = (httpx.TimeoutException, httpx.NetworkError, httpx.RemoteProtocolError)
_MAX_SERVER_MESSAGE = 500
_EFFORT_PARAMETER = "reasoning_effort"
_LIMIT_PARAMETER = "max_tokens"
_NEW_LIMIT_PARAMETER = "max_completion_tokens"
_REASONING_EFFORT = {"low": "low", "medium": "medium", "high": "high", "xhigh": "high",
                     "max": "high"}


class _CallFailed(Exception):
    """Internal: one child's HTTP exchange failed for an ordinary reason (``args[0]``)."""


class _Rejected(_CallFailed):
    """Internal: the server refused the request with a status that is not retried."""

    def __init__(self, message: str, status: int, body: str) -> None:
        super().__init__(message)
        self.status = status
        self.body = body

    def names_parameter(self, name: str) -> bool:
        return self.status in (400, 422) and name in self.body


class _ChildUsage:
    """Token usage summed over the calls of one child."""

    def __init__(self) -> None:
        self.input = self.output = self.cached = 0
        self.seen = False

    def add(self, usage: Any) -> None:
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
        self.max_retries = max_retries
        self.timeout_s = float(timeout_s)
        self.max_connections = max_connections
        self.backoff_base_s = float(backoff_base_s)
        self.backoff_max_s = float(backoff_max_s)
        self._url = f"{self.base_url}/chat/completions"
        self._headers = {"Accept": "application/json", "Content-Type": "application/json"}
        key = api_key or _env("DSH_WORKFLOW_OPENAI_API_KEY", "OPENAI_API_KEY")
        self._secrets = (key,)  # redacted from every error text
        if key:
            self._headers["Authorization"] = f"Bearer {key}"
        self._headers.update(extra_headers or {})
        self._client: httpx.AsyncClient | None = None
        self._entered = False
        self._effort_rejected: set[str] = set()  # models whose endpoint refused reasoning_effort
        self._limit_renamed: set[str] = set()  # models that take max_completion_tokens instead

    @property
    def identity(self) -> str:
        """What answers this provider's calls, for durable runs' journal keys (docs/durable-runs.md): the
        endpoint and the default model (a call's own model is part of its key too)."""
        return f"openai {self.base_url} {self.model}"

    @property
    def description(self) -> str:
        """What its children can do, in one line (docs/embedding.md, "The model-facing tool")."""
        return (f"model {self.model} (opts.model picks another), one chat completion per child: "
                "no tools, no files, it sees only its prompt; an invalid structured answer is "
                "re-asked once, quoting what was wrong")

    @property
    def info(self) -> ProviderInfo:
        """What this provider declares: kind ``openai``, its model as the default, the endpoint
        and model as its record, and the API key as its secret."""
        return ProviderInfo(kind="openai", identity=self.identity, default_model=self.model,
                            description=self.description,
                            record={"kind": "openai", "base_url": self.base_url,
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
        The usage is priced for the model that answered (:mod:`dsh_workflow._prices`)."""
        client = self._client
        if client is None:
            raise RuntimeError("OpenAIProvider.run() called outside its 'async with' block")
        model = request.model or self.model
        result = await self._answer(client, request, model)
        if result.usage is None:
            return result
        return result.model_copy(update={"usage": await priced_async(result.usage, model)})

    async def _answer(self, client: httpx.AsyncClient, request: SubagentRequest,
                      model: str) -> SubagentResult:
        schema = request.schema
        messages: list[dict[str, str]] = []
        if request.agent is not None and request.agent.system_prompt:
            messages.append({"role": "system", "content": request.agent.system_prompt})
        messages.append({"role": "user", "content": request.prompt})
        effort = _REASONING_EFFORT[request.effort] if request.effort is not None else None
        spent = _ChildUsage()
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
                                  usage=spent.usage())
        if answer.violations:
            return SubagentResult(
                stop_reason="error",
                text=answer.text,
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
        spent.add(data.get("usage"))
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
                    raise self._recurring(rejected, model) or rejected
        try:
            return await self._post(client, json.dumps(body).encode("ascii"))
        except _Rejected as rejected:
            raise self._recurring(rejected, model) or rejected from None

    def _recurring(self, rejected: _Rejected, model: str) -> ProviderUnavailable | None:
        """The fault a refusal means for every later child too (credentials refused, the
        model unknown), or None for a refusal of this one request."""
        message = _server_message_of(rejected.body) or "(no message)"
        if rejected.status in (401, 403):
            return ProviderUnavailable(
                f"the provider refused its credentials: {rejected.status} {message} "
                f"({self.base_url})", secrets=self._secrets)
        if rejected.status == 404:
            return ProviderUnavailable(
                f"the endpoint does not know the model {model!r}: 404 {message} "
                f"({self.base_url})", secrets=self._secrets)
        return None

    async def _post(self, client: httpx.AsyncClient, body: bytes) -> dict[str, Any]:
        """POST with retries; returns the decoded JSON object or raises ``_CallFailed``."""
        attempts = self.max_retries + 1
        problem = ""
        unreachable = True  # every attempt failed to connect at all
        for attempt in range(attempts):
            retry_after: float | None = None
            try:
                response = await client.post(self._url, content=body)
            except _RETRYABLE_TRANSPORT as exc:
                unreachable = unreachable and isinstance(exc, httpx.ConnectError)
                problem = f"{type(exc).__name__} talking to {self._url}: {exc or 'no detail'}"
            except httpx.HTTPError as exc:
                raise _CallFailed(f"{type(exc).__name__} talking to {self._url}: {exc}") from None
            else:
                unreachable = False
                status = response.status_code
                if 200 <= status < 300:
                    return self._decode(response)
                problem = f"HTTP {status} from {self._url}: {_server_message(response)}"
                if status != 429 and status < 500:
                    raise _Rejected(problem, status, response.text)
                retry_after = _retry_after(response.headers)
            if attempt + 1 < attempts:
                await anyio.sleep(self._delay(attempt, retry_after))
        if unreachable:
            raise ProviderUnavailable(
                f"the endpoint is unreachable: {problem} (gave up after {attempts} attempts)",
                secrets=self._secrets)
        raise _CallFailed(f"{problem} (gave up after {attempts} attempts)")

    def _decode(self, response: httpx.Response) -> dict[str, Any]:
        try:
            data = response.json()
        except ValueError:
            raise _CallFailed(f"the response from {self._url} is not JSON: {response.text[:200]!r}") from None
        if not isinstance(data, dict):
            raise _CallFailed(f"the response from {self._url} is not a JSON object")
        return data

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(retry_after, self.backoff_max_s)
        ceiling = min(self.backoff_max_s, self.backoff_base_s * 2.0**attempt)
        return ceiling * random.uniform(0.5, 1.0)


def _server_message_of(body: str) -> str | None:
    """The error message of a JSON error body: OpenAI's ``{"error": {"message": ...}}``, a
    ``{"error": "..."}`` or ``{"message": ...}``; else the body's start (None when empty)."""
    try:
        data = json.loads(body)
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

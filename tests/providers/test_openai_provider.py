"""OpenAIProvider against a real HTTP/1.1 server on 127.0.0.1 (a ThreadingHTTPServer in a thread)."""

from __future__ import annotations

import email.utils
import json
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, TypedDict

import anyio
import pytest
from _support import ENGINE_SKIPS, await_until, quickjs_factory, subprocess_factory

from dsh_workflow import (
    AgentDefinition,
    AgentEnded,
    AgentRetried,
    EngineConfig,
    OpenAIProvider,
    QuickJSEngine,
    RetryPolicy,
    SubagentRequest,
    Usage,
    WorkflowStartRequest,
)

SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


class Timing(TypedDict):
    """The provider's timing settings, as keyword arguments."""

    backoff_base_s: float
    backoff_max_s: float
    timeout_s: float


FAST = Timing(backoff_base_s=0.01, backoff_max_s=0.05, timeout_s=10.0)

Action = Callable[["_Handler", dict[str, Any]], None]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        fake = self.server.fake
        with fake.lock:
            fake.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
            action = fake.script.pop(0) if fake.script else chat_echo
        action(self, body)

    def send_json(self, status: int, payload: object, headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(data)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128
    fake: FakeOpenAI

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that went away mid-response is expected here


class FakeOpenAI:
    """The scripted server: ``script`` actions are used in order, then ``chat_echo``."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: list[dict[str, Any]] = []
        self.script: list[Action] = []
        self.disconnected = threading.Event()
        self.disconnects = 0
        self.active = self.peak = 0
        self.httpd = _Server(("127.0.0.1", 0), _Handler)
        self.httpd.fake = self
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05})

    def provider(self, **options: Any) -> OpenAIProvider:
        options = {"base_url": self.url, "model": "test-model", "api_key": "sk-test", **FAST, **options}
        return OpenAIProvider(**options)


@pytest.fixture(autouse=True)
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """httpx honours proxy variables; the tests talk to 127.0.0.1 directly."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


@pytest.fixture
def server() -> Iterator[FakeOpenAI]:
    fake = FakeOpenAI()
    fake.thread.start()
    try:
        yield fake
    finally:
        fake.httpd.shutdown()
        fake.httpd.server_close()
        fake.thread.join()


def completion(content: str | None, usage: tuple[int, int] | None = (3, 5)) -> dict[str, Any]:
    reply: dict[str, Any] = {
        "id": "cmpl-1",
        "object": "chat.completion",
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
    }
    if usage is not None:
        reply["usage"] = {"prompt_tokens": usage[0], "completion_tokens": usage[1], "total_tokens": sum(usage)}
    return reply


def chat(content: str, usage: tuple[int, int] | None = (3, 5)) -> Action:
    return lambda handler, body: handler.send_json(200, completion(content, usage))


def chat_echo(handler: _Handler, body: dict[str, Any]) -> None:
    handler.send_json(200, completion(f"echo:{body['messages'][-1]['content']}"))


def status(code: int, message: str, headers: dict[str, str] | None = None) -> Action:
    payload = {"error": {"message": message, "type": "test_error"}}
    return lambda handler, body: handler.send_json(code, payload, headers)


def slow_echo(handler: _Handler, body: dict[str, Any]) -> None:
    """``chat_echo`` after 50 ms, counting how many requests are in flight at once."""
    fake = handler.server.fake
    with fake.lock:
        fake.active += 1
        fake.peak = max(fake.peak, fake.active)
    time.sleep(0.05)
    with fake.lock:
        fake.active -= 1
    chat_echo(handler, body)


def hang(handler: _Handler, body: dict[str, Any]) -> None:
    """Answer nothing; record when the client closes the connection."""
    sock = handler.connection
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        readable, _, _ = select.select([sock], [], [], 0.02)
        if readable:
            try:
                data = sock.recv(1, socket.MSG_PEEK)
            except OSError:
                data = b""
            if not data:
                fake = handler.server.fake
                with fake.lock:
                    fake.disconnects += 1
                fake.disconnected.set()
                break
    handler.close_connection = True


def request(prompt: str = "hello", **fields: Any) -> SubagentRequest:
    return SubagentRequest(prompt=prompt, label="child", run_id="run-1", seq=1, **fields)


@pytest.mark.anyio
async def test_text_success_with_usage(server: FakeOpenAI) -> None:
    server.script = [chat("the answer", usage=(11, 7))]
    async with server.provider(extra_headers={"X-Extra": "yes"}) as provider:
        result = await provider.run(request("what?"))
    assert result.stop_reason == "completed"
    assert result.text == "the answer"
    assert result.structured is None and result.error is None
    assert result.usage == Usage(input_tokens=11, output_tokens=7)
    (sent,) = server.requests
    assert sent["path"] == "/v1/chat/completions"
    assert sent["body"] == {"model": "test-model", "messages": [{"role": "user", "content": "what?"}]}
    assert sent["headers"]["Authorization"] == "Bearer sk-test"
    assert sent["headers"]["X-Extra"] == "yes"


@pytest.mark.anyio
async def test_no_usage_reported(server: FakeOpenAI) -> None:
    server.script = [chat("x", usage=None)]
    async with server.provider() as provider:
        result = await provider.run(request())
    assert result.stop_reason == "completed" and result.usage is None


@pytest.mark.anyio
async def test_model_override_per_request(server: FakeOpenAI) -> None:
    async with server.provider() as provider:
        await provider.run(request(model="other-model"))
        await provider.run(request())
    assert [r["body"]["model"] for r in server.requests] == ["other-model", "test-model"]


@pytest.mark.anyio
async def test_schema_success(server: FakeOpenAI) -> None:
    server.script = [chat('```json\n{"n": 42}\n```')]
    async with server.provider() as provider:
        result = await provider.run(request(schema=SCHEMA))
    assert result.stop_reason == "completed"
    assert result.structured == {"n": 42}
    assert server.requests[0]["body"]["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "result", "schema": SCHEMA, "strict": False},
    }


@pytest.mark.anyio
async def test_schema_repair_success(server: FakeOpenAI) -> None:
    server.script = [chat('{"n": "seven"}', usage=(10, 4)), chat('{"n": 7}', usage=(20, 2))]
    async with server.provider() as provider:
        result = await provider.run(request("count", schema=SCHEMA))
    assert result.stop_reason == "completed"
    assert result.structured == {"n": 7}
    assert result.usage == Usage(input_tokens=30, output_tokens=6)
    first, repair = server.requests
    messages = repair["body"]["messages"]
    assert messages[:2] == [
        {"role": "user", "content": "count"},
        {"role": "assistant", "content": '{"n": "seven"}'},
    ]
    assert messages[2]["role"] == "user"
    assert "value.n: 'seven' is not of type 'integer'" in messages[2]["content"]
    assert repair["body"]["response_format"] == first["body"]["response_format"]


@pytest.mark.anyio
async def test_schema_repair_failure(server: FakeOpenAI) -> None:
    server.script = [chat("not json at all"), chat('{"m": 1}')]
    async with server.provider() as provider:
        result = await provider.run(request(schema=SCHEMA))
    assert result.stop_reason == "error" and result.error_kind == "invalid_answer"
    assert result.structured == {"m": 1}  # the engine validates it and says what is wrong
    assert result.text == '{"m": 1}'
    assert "after one repair attempt" in (result.error or "")
    assert "'n' is a required property" in (result.error or "")
    assert "not valid JSON" in server.requests[1]["body"]["messages"][2]["content"]
    assert len(server.requests) == 2
    assert result.usage == Usage(input_tokens=6, output_tokens=10)


@pytest.mark.anyio
async def test_an_answer_still_not_json_after_the_repair_has_no_value(server: FakeOpenAI) -> None:
    server.script = [chat("no"), chat("still no")]
    async with server.provider() as provider:
        result = await provider.run(request(schema=SCHEMA))
    assert result.error_kind == "invalid_answer" and result.structured is None
    assert result.text == "still no"


@pytest.mark.anyio
async def test_429_is_rate_limited_with_retry_after_as_retry_at(server: FakeOpenAI) -> None:
    server.script = [status(429, "slow down", {"Retry-After": "30"})]
    async with server.provider() as provider:
        before = datetime.now(UTC)
        result = await provider.run(request())
    assert result.stop_reason == "error" and result.error_kind == "rate_limited"
    assert result.retry_at is not None
    assert 29 <= (result.retry_at - before).total_seconds() <= 32
    assert "HTTP 429" in (result.error or "") and "slow down" in (result.error or "")
    assert len(server.requests) == 1  # the provider never retries: the engine does


@pytest.mark.anyio
async def test_an_absurd_retry_after_is_a_far_reset_not_a_crash(server: FakeOpenAI) -> None:
    server.script = [status(429, "slow down", {"Retry-After": "1e308"})]
    async with server.provider() as provider:
        result = await provider.run(request())
    assert result.error_kind == "rate_limited" and result.retry_at is not None
    assert (result.retry_at - datetime.now(UTC)).days >= 365  # beyond any cap: the engine's limit


@pytest.mark.anyio
async def test_retry_after_ms_and_http_dates_are_read(server: FakeOpenAI) -> None:
    later = email.utils.format_datetime(datetime.now(UTC) + timedelta(seconds=90), usegmt=True)
    server.script = [status(429, "a", {"retry-after-ms": "1500"}),
                     status(503, "b", {"Retry-After": later})]
    async with server.provider() as provider:
        now = datetime.now(UTC)
        first = await provider.run(request())
        second = await provider.run(request())
    assert first.retry_at is not None and 1 <= (first.retry_at - now).total_seconds() <= 3
    assert second.error_kind == "overloaded"
    assert second.retry_at is not None and 85 <= (second.retry_at - now).total_seconds() <= 92


@pytest.mark.anyio
@pytest.mark.parametrize(("code", "body", "kind"), [
    (400, "model 'nope' does not exist", "bad_request"),
    (401, "Incorrect API key provided", "auth"),
    (403, "forbidden", "auth"),
    (404, "The model `gpt-9` does not exist", "not_found"),
    (408, "too slow", "timeout"),
    (413, "too large", "bad_request"),
    (422, "unprocessable", "bad_request"),
    (429, "You exceeded your current quota (insufficient_quota)", "limit"),
    (429, "Rate limit reached", "rate_limited"),
    (500, "boom", "server"),
    (502, "bad gateway", "server"),
    (503, "overloaded", "overloaded"),
    (529, "Overloaded", "overloaded"),
])
async def test_each_status_is_classified_and_requested_once(
        server: FakeOpenAI, code: int, body: str, kind: str) -> None:
    server.script = [status(code, body)]
    async with server.provider() as provider:
        result = await provider.run(request())
    assert result.stop_reason == "error" and result.error_kind == kind
    assert body in (result.error or "")
    assert len(server.requests) == 1


@pytest.mark.anyio
async def test_malformed_reply_is_ordinary_failure(server: FakeOpenAI) -> None:
    server.script = [lambda handler, body: handler.send_json(200, {"choices": []})]
    async with server.provider() as provider:
        result = await provider.run(request())
    assert result.stop_reason == "error" and "malformed" in (result.error or "")


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.anyio
async def test_connection_refused_is_network() -> None:
    port = _closed_port()
    provider = OpenAIProvider(base_url=f"http://127.0.0.1:{port}/v1", model="m", **FAST)
    async with provider:
        result = await provider.run(request())
    assert result.stop_reason == "error" and result.error_kind == "network"
    assert (result.error or "").startswith(
        f"the endpoint is unreachable: ConnectError talking to http://127.0.0.1:{port}/v1/chat/"
        "completions"), result.error


@pytest.mark.anyio
async def test_an_unknown_host_is_network() -> None:
    provider = OpenAIProvider(base_url="http://no-such-host.invalid/v1", model="m", **FAST)
    async with provider:
        result = await provider.run(request())
    assert result.error_kind == "network"
    assert (result.error or "").startswith("the endpoint is unreachable: ConnectError")


@pytest.mark.anyio
@pytest.mark.parametrize("code", [401, 403])
async def test_refused_credentials_are_auth_and_name_the_cause(server: FakeOpenAI,
                                                               code: int) -> None:
    key = "sk-live-0123456789abcdef"
    server.script = [status(code, f"Incorrect API key provided: {key}")]
    async with server.provider(api_key=key) as provider:
        result = await provider.run(request())
    assert result.error_kind == "auth"
    assert result.error == (f"the provider refused its credentials: {code} Incorrect API "
                            f"key provided: [REDACTED] ({server.url})")
    assert len(server.requests) == 1


@pytest.mark.anyio
async def test_an_unknown_model_is_not_found_and_named(server: FakeOpenAI) -> None:
    server.script = [status(404, "The model `gpt-9` does not exist")]
    async with server.provider() as provider:
        result = await provider.run(request(model="gpt-9"))
    assert result.error_kind == "not_found"
    assert result.error == ("the endpoint does not know the model 'gpt-9': 404 The model "
                            f"`gpt-9` does not exist ({server.url})")


@pytest.mark.anyio
async def test_the_key_is_redacted_from_an_ordinary_failure(server: FakeOpenAI) -> None:
    key = "my-private-key-1234"
    server.script = [status(400, f"bad request from key {key}")]
    async with server.provider(api_key=key) as provider:
        result = await provider.run(request())
    assert result.stop_reason == "error"
    assert result.error == f"HTTP 400 from {server.url}/chat/completions: bad request from key [REDACTED]"


@pytest.mark.anyio
async def test_a_failed_repair_says_what_was_wrong_with_the_last_answer(server: FakeOpenAI) -> None:
    server.script = [chat('{"n": "one"}'), chat('{"n": "two"}')]
    async with server.provider() as provider:
        result = await provider.run(request(schema=SCHEMA))
    assert result.stop_reason == "error"
    error = result.error or ""
    assert "after one repair attempt" in error and "'two' is not of type 'integer'" in error
    assert """(the last answer began: '{"n": "two"}')""" in error


@pytest.mark.anyio
@pytest.mark.parametrize("factory", [quickjs_factory, subprocess_factory(pool_size=1)],
                         ids=["quickjs", "subprocess"])
async def test_a_run_on_refused_credentials_ends_at_once_with_the_cause(
        server: FakeOpenAI, factory: Any) -> None:
    if factory is None:
        pytest.skip(ENGINE_SKIPS.get("subprocess", "subprocess engine unavailable"))
    server.script = [status(401, "Incorrect API key provided")] * 20
    ends: list[AgentEnded] = []
    async with server.provider() as provider, \
            factory(EngineConfig(max_concurrent_agents=1), provider) as engine:
        engine.events.subscribe(lambda e: ends.append(e) if isinstance(e, AgentEnded) else None)
        run = engine.start(WorkflowStartRequest(
            meta={"name": "keyed", "description": "d"},
            script="return await parallel([1, 2, 3, 4, 5].map((i) => () => agent('p' + i)))"))
        result = await run.result()
        await run.dispose()
    assert result.stop_reason == "error"
    assert result.error == ("AGENT_FAILED: agent 1 (p1) failed (auth): the provider refused its "
                            f"credentials: 401 Incorrect API key provided ({server.url})")
    assert len(server.requests) == 1  # one request: not retried, and no other child started
    assert ends[0].error is not None and ends[0].error.kind == "provider"
    assert ends[0].error.cause == "auth"
    assert "401 Incorrect API key provided" in ends[0].error.message


@pytest.mark.anyio
async def test_read_timeout_is_ordinary_failure(server: FakeOpenAI) -> None:
    server.script = [hang]
    async with server.provider(timeout_s=0.3) as provider:
        result = await provider.run(request())
    assert result.stop_reason == "error" and "ReadTimeout" in (result.error or "")
    assert result.error_kind == "timeout"


@pytest.mark.anyio
async def test_cancellation_closes_the_connection(server: FakeOpenAI) -> None:
    server.script = [hang]
    finished = False

    async def child() -> None:
        nonlocal finished
        await provider.run(request())
        finished = True

    async with server.provider() as provider:
        async with anyio.create_task_group() as tg:
            tg.start_soon(child)
            await await_until(lambda: server.requests, what="the request to arrive", timeout=5)
            await anyio.sleep(0.1)
            assert not server.disconnected.is_set()
            tg.cancel_scope.cancel()
        cancelled_at = time.monotonic()
        await await_until(server.disconnected.is_set, what="the server to see the disconnect",
                          timeout=2)
        assert time.monotonic() - cancelled_at < 1.0
    assert not finished


@pytest.mark.anyio
async def test_cancelling_a_run_closes_fifty_requests_in_flight(server: FakeOpenAI) -> None:
    server.script = [hang] * 50
    config = EngineConfig(max_concurrent_agents=50, dispose_grace_s=2.0)
    ended: list[str] = []
    async with server.provider(max_connections=50) as provider:
        async with QuickJSEngine(config, provider=provider) as engine:
            engine.events.subscribe(
                lambda e: ended.append(e.outcome) if isinstance(e, AgentEnded) else None)
            run = engine.start(WorkflowStartRequest(
                meta={"name": "fifty", "description": "fifty requests in flight"},
                script="return await parallel(Array.from({length: 50}, "
                       "(_, i) => () => agent('p' + i)))"))
            await await_until(lambda: len(server.requests) >= 50,
                              what="fifty requests in flight", timeout=10)
            run.cancel("enough")
            result = await run.result()
            await run.dispose()
        await await_until(lambda: server.disconnects >= 50,
                          what="the server to see fifty disconnects", timeout=2)
    assert result.stop_reason == "cancelled" and result.agents_started == 50
    assert ended == ["cancelled"] * 50


@pytest.mark.anyio
async def test_fifty_concurrent_requests(server: FakeOpenAI) -> None:
    server.script = [slow_echo] * 50
    results: dict[int, str | None] = {}

    async def one(i: int) -> None:
        results[i] = (await provider.run(request(f"p{i}"))).text

    async with server.provider(max_connections=16) as provider:
        async with anyio.create_task_group() as tg:
            for i in range(50):
                tg.start_soon(one, i)
    assert results == {i: f"echo:p{i}" for i in range(50)}
    assert len(server.requests) == 50
    assert 1 < server.peak <= 16  # concurrent, but never more connections than the pool allows


@pytest.mark.anyio
async def test_run_outside_context_raises(server: FakeOpenAI) -> None:
    provider = server.provider()
    with pytest.raises(RuntimeError, match="async with"):
        await provider.run(request())
    async with provider:
        pass
    with pytest.raises(RuntimeError, match="async with"):
        await provider.run(request())
    with pytest.raises(RuntimeError, match="only once"):
        async with provider:
            pass


_ENV = [
    "DSH_WORKFLOW_OPENAI_BASE_URL",
    "OPENAI_BASE_URL",
    "DSH_WORKFLOW_OPENAI_API_KEY",
    "OPENAI_API_KEY",
    "DSH_WORKFLOW_OPENAI_MODEL",
    "OPENAI_MODEL",
]


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in _ENV:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def test_configuration_from_environment(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("OPENAI_MODEL", "generic-model")
    clean_env.setenv("OPENAI_BASE_URL", "http://generic/v1")
    provider = OpenAIProvider()
    assert (provider.model, provider.base_url) == ("generic-model", "http://generic/v1")
    clean_env.setenv("DSH_WORKFLOW_OPENAI_MODEL", "own-model")
    clean_env.setenv("DSH_WORKFLOW_OPENAI_BASE_URL", "http://own/v1/")
    provider = OpenAIProvider()
    assert (provider.model, provider.base_url) == ("own-model", "http://own/v1")
    provider = OpenAIProvider(model="arg-model", base_url="https://arg/v1")
    assert (provider.model, provider.base_url) == ("arg-model", "https://arg/v1")


@pytest.mark.anyio
async def test_api_key_from_environment(server: FakeOpenAI, clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("OPENAI_API_KEY", "sk-generic")
    clean_env.setenv("DSH_WORKFLOW_OPENAI_API_KEY", "sk-own")
    async with OpenAIProvider(base_url=server.url, model="m", **FAST) as provider:
        await provider.run(request())
    clean_env.delenv("DSH_WORKFLOW_OPENAI_API_KEY")
    clean_env.delenv("OPENAI_API_KEY")
    async with OpenAIProvider(base_url=server.url, model="m", **FAST) as provider:
        await provider.run(request())
    assert server.requests[0]["headers"]["Authorization"] == "Bearer sk-own"
    assert "Authorization" not in server.requests[1]["headers"]
    assert "sk-own" not in repr(provider)


def test_default_base_url(clean_env: pytest.MonkeyPatch) -> None:
    assert OpenAIProvider(model="m").base_url == "https://api.openai.com/v1"


def test_missing_model_is_value_error(clean_env: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="DSH_WORKFLOW_OPENAI_MODEL"):
        OpenAIProvider(base_url="http://x/v1")


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"base_url": "ftp://x"}, "http"),
        ({"max_retries": -1}, "max_retries"),
        ({"max_connections": 0}, "max_connections"),
        ({"timeout_s": 0}, "timeout_s"),
        ({"backoff_base_s": -1}, "backoff_base_s"),
        ({"backoff_max_s": float("inf")}, "backoff_max_s"),
    ],
)
def test_invalid_settings(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        OpenAIProvider(model="m", **options)


# -- Claude Code options: effort, agent definitions, isolation (docs/scripts.md) -----------------------

REVIEWER = AgentDefinition(name="reviewer", description="reviews", system_prompt="You review code.")


@pytest.mark.anyio
@pytest.mark.parametrize(("effort", "sent"), [("low", "low"), ("medium", "medium"),
                                              ("high", "high"), ("xhigh", "high"),
                                              ("max", "high")])
async def test_effort_is_sent_as_reasoning_effort(server: FakeOpenAI, effort: str, sent: str) -> None:
    async with server.provider() as provider:
        result = await provider.run(request(effort=effort))
    assert result.stop_reason == "completed"
    assert server.requests[0]["body"]["reasoning_effort"] == sent


@pytest.mark.anyio
async def test_no_effort_sends_no_reasoning_effort(server: FakeOpenAI) -> None:
    async with server.provider() as provider:
        await provider.run(request())
    assert "reasoning_effort" not in server.requests[0]["body"]


def rejects_effort(handler: _Handler, body: dict[str, Any]) -> None:
    """A server without reasoning support: any request carrying reasoning_effort is a 400."""
    if "reasoning_effort" in body:
        handler.send_json(400, {"error": {"message": "Unrecognized request argument supplied: "
                                          "reasoning_effort", "type": "invalid_request_error",
                                          "param": "reasoning_effort"}})
    else:
        chat_echo(handler, body)


@pytest.mark.anyio
async def test_rejected_effort_is_retried_without_and_dropped_for_that_model(server: FakeOpenAI) -> None:
    server.script = [rejects_effort] * 10
    async with server.provider() as provider:
        first = await provider.run(request("a", effort="high"))
        second = await provider.run(request("b", effort="low", schema=SCHEMA))
        other = await provider.run(request("c", effort="high", model="other-model"))
    assert first.stop_reason == "completed" and first.text == "echo:a"
    assert second.stop_reason == "error"  # "echo:b" is no JSON; the repair goes without effort too
    assert other.stop_reason == "completed"
    sent = [(r["body"]["model"], r["body"].get("reasoning_effort")) for r in server.requests]
    assert sent == [("test-model", "high"), ("test-model", None),  # rejected, retried once without
                    ("test-model", None), ("test-model", None),    # no longer sent for that model
                    ("other-model", "high"), ("other-model", None)]  # another model is tried anew


@pytest.mark.anyio
async def test_effort_rejected_as_422_by_a_validating_server(server: FakeOpenAI) -> None:
    detail = {"detail": [{"loc": ["body", "reasoning_effort"], "msg": "Extra inputs are not permitted"}]}
    server.script = [lambda handler, body: handler.send_json(422, detail)]
    async with server.provider() as provider:
        result = await provider.run(request(effort="medium"))
    assert result.stop_reason == "completed"
    assert [r["body"].get("reasoning_effort") for r in server.requests] == ["medium", None]


@pytest.mark.anyio
async def test_effort_fallback_happens_once(server: FakeOpenAI) -> None:
    naming = status(400, "reasoning_effort is not supported with this model")
    server.script = [naming, naming]
    async with server.provider() as provider:
        result = await provider.run(request(effort="high"))
    assert result.stop_reason == "error" and "HTTP 400" in (result.error or "")
    assert len(server.requests) == 2


@pytest.mark.anyio
async def test_other_400_with_effort_is_not_retried(server: FakeOpenAI) -> None:
    server.script = [status(400, "maximum context length exceeded")]
    async with server.provider() as provider:
        result = await provider.run(request(effort="high"))
        again = await provider.run(request(effort="high"))
    assert result.stop_reason == "error" and "maximum context length" in (result.error or "")
    assert again.stop_reason == "completed"
    assert [r["body"].get("reasoning_effort") for r in server.requests] == ["high", "high"]


@pytest.mark.anyio
async def test_agent_system_prompt_is_a_system_message(server: FakeOpenAI) -> None:
    server.script = [chat('{"n": "x"}'), chat('{"n": 1}')]
    async with server.provider() as provider:
        result = await provider.run(request("review this", agent=REVIEWER, agent_type="reviewer",
                                            schema=SCHEMA))
    assert result.stop_reason == "completed" and result.structured == {"n": 1}
    system = {"role": "system", "content": "You review code."}
    first, repair = (r["body"]["messages"] for r in server.requests)
    assert first == [system, {"role": "user", "content": "review this"}]
    assert repair[:3] == [system, {"role": "user", "content": "review this"},
                          {"role": "assistant", "content": '{"n": "x"}'}]


@pytest.mark.anyio
async def test_agent_without_system_prompt_and_isolation_change_nothing(server: FakeOpenAI) -> None:
    general = AgentDefinition(name="general-purpose")
    async with server.provider() as provider:
        result = await provider.run(request("hi", agent=general, agent_type="general-purpose",
                                            isolation="worktree"))
    assert result.stop_reason == "completed" and result.text == "echo:hi"
    assert server.requests[0]["body"] == {"model": "test-model",
                                          "messages": [{"role": "user", "content": "hi"}]}


# -- the connection pool does not throttle the engine ----------------------------------------


def gather_then_echo(count: int) -> Action:
    """Hold each request until ``count`` are in flight at once (or 3 s pass), then echo."""

    def action(handler: _Handler, body: dict[str, Any]) -> None:
        fake = handler.server.fake
        with fake.lock:
            fake.active += 1
            fake.peak = max(fake.peak, fake.active)
        deadline = time.monotonic() + 3.0
        while fake.active < count and fake.peak < count and time.monotonic() < deadline:
            time.sleep(0.005)
        with fake.lock:
            fake.active -= 1
        chat_echo(handler, body)

    return action


@pytest.mark.anyio
async def test_default_pool_lets_64_requests_reach_the_server_at_once(server: FakeOpenAI) -> None:
    server.script = [gather_then_echo(64)] * 64
    results: dict[int, str | None] = {}

    async def one(i: int) -> None:
        results[i] = (await provider.run(request(f"p{i}"))).text

    async with server.provider() as provider, anyio.create_task_group() as tg:
        for i in range(64):
            tg.start_soon(one, i)
    assert results == {i: f"echo:p{i}" for i in range(64)}
    assert server.peak == 64


@pytest.mark.anyio
@pytest.mark.parametrize("engine", ["quickjs", "subprocess"])
async def test_engine_with_64_concurrent_agents_gets_64_requests_in_flight(
        server: FakeOpenAI, engine: str) -> None:
    factory = quickjs_factory if engine == "quickjs" else subprocess_factory(1)
    if factory is None:
        pytest.skip(ENGINE_SKIPS["subprocess"])
    server.script = [gather_then_echo(64)] * 64
    config = EngineConfig(max_concurrent_agents=64)
    async with server.provider() as provider, factory(config, provider) as eng:
        run = eng.start(WorkflowStartRequest(
            meta={"name": "wide", "description": "64 agents at once"},
            script="return await parallel(Array.from({length: 64}, "
                   "(_, i) => () => agent('p' + i)))"))
        result = await run.result()
    assert result.stop_reason == "completed"
    assert result.value == [f"echo:p{i}" for i in range(64)]
    assert server.peak == 64


@pytest.mark.anyio
async def test_waiting_for_a_pooled_connection_has_no_timeout(server: FakeOpenAI) -> None:
    # httpcore re-arms its pool wait whenever a connection it was promised turns out busy, so a
    # pool timeout is hard to provoke from outside; the setting itself is the contract here.
    async with server.provider(max_connections=2, timeout_s=0.5) as provider:
        timeout = provider._client.timeout  # type: ignore[union-attr]  # the client exists once entered
        assert timeout.pool is None
        assert (timeout.connect, timeout.read, timeout.write) == (0.5, 0.5, 0.5)


# ---- the output-token limit (budgets) ----------------------------------------------------


@pytest.mark.anyio
async def test_max_output_tokens_is_sent_as_max_tokens(server: FakeOpenAI) -> None:
    async with server.provider() as provider:
        await provider.run(request("a", max_output_tokens=700))
        await provider.run(request("b"))
    assert server.requests[0]["body"]["max_tokens"] == 700
    assert "max_tokens" not in server.requests[1]["body"]
    assert "max_completion_tokens" not in server.requests[1]["body"]


@pytest.mark.anyio
async def test_repair_request_gets_what_the_first_answer_left(server: FakeOpenAI) -> None:
    server.script = [chat("not json", usage=(10, 40)), chat('{"n": 1}', usage=(10, 5))]
    async with server.provider() as provider:
        result = await provider.run(request("a", schema=SCHEMA, max_output_tokens=100))
    assert result.stop_reason == "completed" and result.structured == {"n": 1}
    assert [r["body"]["max_tokens"] for r in server.requests] == [100, 60]


def wants_new_limit_name(handler: _Handler, body: dict[str, Any]) -> None:
    """A reasoning-model endpoint: max_tokens is refused in favour of max_completion_tokens."""
    if "max_tokens" in body:
        handler.send_json(400, {"error": {
            "message": "Unsupported parameter: 'max_tokens' is not supported with this model. "
                       "Use 'max_completion_tokens' instead.",
            "type": "invalid_request_error", "param": "max_tokens"}})
    else:
        chat_echo(handler, body)


@pytest.mark.anyio
async def test_rejected_max_tokens_is_renamed_for_that_model(server: FakeOpenAI) -> None:
    server.script = [wants_new_limit_name] * 5
    async with server.provider() as provider:
        first = await provider.run(request("a", max_output_tokens=50))
        second = await provider.run(request("b", max_output_tokens=30))
    assert first.stop_reason == "completed" and second.stop_reason == "completed"
    sent = [(r["body"].get("max_tokens"), r["body"].get("max_completion_tokens"))
            for r in server.requests]
    assert sent == [(50, None), (None, 50), (None, 30)]


@pytest.mark.anyio
async def test_engine_budget_reaches_the_server_as_the_output_limit(server: FakeOpenAI) -> None:
    """End to end: a run with budget_tokens=100 against a real local server. Each answer
    reports 3 + 5 tokens, so the server sees the budget left at each child's start; once the
    budget is spent the script's next call throws BUDGET_EXCEEDED."""
    from dsh_workflow import EngineConfig, WorkflowStartRequest

    async with server.provider() as provider:
        async with QuickJSEngine(EngineConfig(budget_tokens=20), provider=provider) as engine:
            run = engine.start(WorkflowStartRequest(
                meta={"name": "budget", "description": "budget"},
                script="const out = [];\n"
                       "try { for (let i = 0; i < 5; i++) out.push(await agent('p' + i)); }\n"
                       "catch (e) { out.push(e.code); }\nreturn out;"))
            result = await run.result()
            await run.dispose()
    assert result.value == ["echo:p0", "echo:p1", "echo:p2", "BUDGET_EXCEEDED"]
    assert [r["body"]["max_tokens"] for r in server.requests] == [20, 12, 4]
    assert result.usage.total_tokens == 24


def _with_cached(content: str, prompt: int, completion_tokens: int, cached: int) -> Action:
    reply = completion(content, (prompt, completion_tokens))
    reply["usage"]["prompt_tokens_details"] = {"cached_tokens": cached}
    return lambda handler, body: handler.send_json(200, reply)


async def _priced_child(provider: OpenAIProvider, model: str | None = None) -> Usage | None:
    """The usage of one child the engine ran on ``provider`` (the engine prices it)."""
    ended: list[AgentEnded] = []
    script = "return await agent('x', args.model ? {model: args.model} : {});"
    async with QuickJSEngine(EngineConfig(), provider=provider) as engine:
        engine.events.subscribe(lambda e: ended.append(e) if isinstance(e, AgentEnded) else None)
        run = engine.start(WorkflowStartRequest(meta={"name": "p", "description": "d"},
                                                script=script, args={"model": model}))
        with anyio.fail_after(30):
            result = await run.result()
    assert result.stop_reason == "completed", result.error
    return ended[0].usage


@pytest.mark.anyio
async def test_usage_is_priced_from_the_price_library_with_cached_tokens(server: FakeOpenAI) -> None:
    import genai_prices

    server.script = [_with_cached("priced", 2000, 300, 1500)]
    async with server.provider(model="gpt-4o") as provider:
        alone = await provider.run(request())
        server.script = [_with_cached("priced", 2000, 300, 1500)]
        usage = await _priced_child(provider)
    assert alone.usage is not None and alone.usage.cost_usd is None  # the engine prices it
    assert usage is not None
    assert (usage.input_tokens, usage.output_tokens) == (2000, 300)
    assert usage.cache_read_tokens == 1500
    expected = genai_prices.calc_price(
        genai_prices.Usage(input_tokens=2000, output_tokens=300, cache_read_tokens=1500),
        model_ref="gpt-4o").total_price
    assert usage.cost_usd == pytest.approx(float(expected))
    uncached = genai_prices.calc_price(genai_prices.Usage(input_tokens=2000, output_tokens=300),
                                       model_ref="gpt-4o").total_price
    assert usage.cost_usd is not None
    assert usage.cost_usd < float(uncached)  # cache reads are cheaper: the rate applied


@pytest.mark.anyio
async def test_an_unknown_model_has_no_cost_never_a_guess(server: FakeOpenAI) -> None:
    server.script = [chat("x", usage=(100, 10))]
    async with server.provider(model="no-such-model-anywhere") as provider:
        usage = await _priced_child(provider)
    assert usage == Usage(input_tokens=100, output_tokens=10)
    assert usage.cost_usd is None


@pytest.mark.anyio
async def test_the_calls_own_model_is_the_one_priced(server: FakeOpenAI) -> None:
    import genai_prices

    server.script = [chat("x", usage=(1000, 100))]
    async with server.provider(model="no-such-model-anywhere") as provider:
        usage = await _priced_child(provider, "gpt-4o-mini")
    expected = genai_prices.calc_price(genai_prices.Usage(input_tokens=1000, output_tokens=100),
                                       model_ref="gpt-4o-mini").total_price
    assert usage is not None and usage.cost_usd == pytest.approx(float(expected))


@pytest.mark.anyio
async def test_the_model_that_answered_is_the_result_s_and_the_one_priced(
        server: FakeOpenAI) -> None:
    import genai_prices

    def answered(handler: _Handler, body: dict[str, Any]) -> None:
        handler.send_json(200, {**completion("x", (1000, 100)), "model": "gpt-4o-mini"})

    server.script = [answered, answered]
    async with server.provider(model="gpt-4o") as provider:
        alone = await provider.run(request())
        usage = await _priced_child(provider)
    assert alone.model == "gpt-4o-mini"
    expected = genai_prices.calc_price(genai_prices.Usage(input_tokens=1000, output_tokens=100),
                                       model_ref="gpt-4o-mini").total_price
    assert usage is not None and usage.cost_usd == pytest.approx(float(expected))


# -- the engine retries and decides (SPEC §23, docs/providers.md "Faults and retries") ----------

QUICK_RETRY = RetryPolicy(attempts=3, base_s=0.01, cap_s=5.0)


async def _engine_run(provider: OpenAIProvider, script: str, *, concurrency: int = 4,
                      retry: RetryPolicy = QUICK_RETRY) -> tuple[Any, list[Any]]:
    events: list[Any] = []
    config = EngineConfig(max_concurrent_agents=concurrency, retry=retry)
    async with QuickJSEngine(config, provider=provider) as engine:
        engine.events.subscribe(events.append)
        run = engine.start(WorkflowStartRequest(meta={"name": "http", "description": "d"},
                                                script=script))
        with anyio.fail_after(20):
            result = await run.result()
        await run.dispose()
    return result, events


@pytest.mark.anyio
async def test_a_429_storm_shares_one_wait_and_is_not_multiplied(server: FakeOpenAI) -> None:
    # 8 children at once, all refused with Retry-After: each is asked once more, after the wait.
    server.script = [status(429, "slow down", {"Retry-After": "0.5"})] * 8
    async with server.provider() as provider:
        started = time.monotonic()
        result, events = await _engine_run(
            provider, "return await parallel(Array.from({length: 8}, (_, i) => () => "
                      "agent('p' + i)))", concurrency=8)
        elapsed = time.monotonic() - started
    assert result.stop_reason == "completed" and result.value == [f"echo:p{i}" for i in range(8)]
    assert len(server.requests) == 16  # 8 refused + 8 answered: no storm of retries
    retried = [e for e in events if isinstance(e, AgentRetried)]
    assert sorted(e.seq for e in retried) == list(range(1, 9))
    assert all(e.cause == "rate_limited" and 0.3 <= e.delay_s <= 0.5 for e in retried)
    assert elapsed >= 0.45


@pytest.mark.anyio
async def test_a_retry_after_pauses_a_child_that_was_never_refused(server: FakeOpenAI) -> None:
    seen: dict[str, float] = {}

    def by_prompt(handler: _Handler, body: dict[str, Any]) -> None:
        prompt = body["messages"][-1]["content"]
        first = prompt not in seen
        seen.setdefault(prompt, time.monotonic())
        if prompt == "a" and first:
            handler.send_json(429, {"error": {"message": "wait"}}, {"Retry-After": "0.6"})
        elif prompt == "slow":
            time.sleep(0.15)
            chat_echo(handler, body)
        else:
            chat_echo(handler, body)

    server.script = [by_prompt] * 10
    async with server.provider() as provider:
        result, _ = await _engine_run(provider, "return await parallel([() => agent('a'), "
                                      "async () => { await agent('slow'); return agent('b') }])")
    assert result.value == ["echo:a", "echo:b"]
    assert seen["b"] - seen["a"] >= 0.5  # "b" started at ~0.15 s and waited for the pause


@pytest.mark.anyio
async def test_500s_are_retried_then_answered(server: FakeOpenAI) -> None:
    server.script = [status(500, "boom"), status(502, "bad gateway"), chat("fine")]
    async with server.provider() as provider:
        result, events = await _engine_run(provider, "return await agent('p')")
    assert result.value == "fine" and len(server.requests) == 3
    assert [(e.attempt, e.cause) for e in events if isinstance(e, AgentRetried)] == [
        (1, "server"), (2, "server")]


@pytest.mark.anyio
async def test_retries_spent_leave_the_child_failed_with_its_cause(server: FakeOpenAI) -> None:
    server.script = [status(503, "overloaded")] * 3
    async with server.provider() as provider:
        result, events = await _engine_run(provider, "return await agent('p')")
    assert result.stop_reason == "completed" and result.value is None
    assert len(server.requests) == 3
    (end,) = [e for e in events if isinstance(e, AgentEnded)]
    assert end.error is not None and (end.error.kind, end.error.cause) == ("provider",
                                                                          "overloaded")
    assert "HTTP 503" in end.error.message


@pytest.mark.anyio
async def test_a_reset_beyond_the_cap_is_a_limit_and_not_waited_for(server: FakeOpenAI) -> None:
    server.script = [status(429, "slow down", {"Retry-After": "600"})]
    async with server.provider() as provider:
        started = time.monotonic()
        _, events = await _engine_run(provider, "return await agent('p')")
    assert time.monotonic() - started < 3 and len(server.requests) == 1
    (end,) = [e for e in events if isinstance(e, AgentEnded)]
    assert end.error is not None and end.error.cause == "limit"


@pytest.mark.anyio
async def test_an_unreachable_endpoint_ends_the_run_after_the_retries() -> None:
    port = _closed_port()
    provider = OpenAIProvider(base_url=f"http://127.0.0.1:{port}/v1", model="m", **FAST)
    async with provider:
        result, events = await _engine_run(provider, "return await agent('p')",
                                           retry=RetryPolicy(attempts=2, base_s=0.01))
    assert result.error_code == "AGENT_FAILED"
    assert (result.error or "").startswith(
        "AGENT_FAILED: agent 1 (p) failed (network, after 2 attempts): the endpoint is "
        "unreachable: ConnectError")
    assert len([e for e in events if isinstance(e, AgentRetried)]) == 1


@pytest.mark.anyio
async def test_cancelling_during_a_retry_wait(server: FakeOpenAI) -> None:
    server.script = [status(429, "wait", {"Retry-After": "30"})]
    events: list[Any] = []
    async with server.provider() as provider, \
            QuickJSEngine(EngineConfig(retry=RetryPolicy(cap_s=60)), provider=provider) as engine:
        engine.events.subscribe(events.append)
        run = engine.start(WorkflowStartRequest(meta={"name": "w", "description": "d"},
                                                script="return await agent('p')"))
        await await_until(lambda: any(isinstance(e, AgentRetried) for e in events),
                          what="the retry to be announced", timeout=5)
        run.cancel("enough")
        with anyio.fail_after(3):
            result = await run.result()
        await run.dispose()
    assert result.stop_reason == "cancelled" and len(server.requests) == 1


@pytest.mark.anyio
async def test_a_schema_failure_after_the_repair_is_kind_invalid(server: FakeOpenAI) -> None:
    server.script = [chat('{"n": "one"}'), chat('{"n": "two"}')]
    async with server.provider() as provider:
        result, events = await _engine_run(
            provider, f"return await agent('p', {{schema: {json.dumps(SCHEMA)}}})")
    assert result.value is None
    (end,) = [e for e in events if isinstance(e, AgentEnded)]
    assert end.error is not None and (end.error.kind, end.error.cause) == ("invalid",
                                                                          "invalid_answer")
    assert end.error.details == ("/n: 'two' is not of type 'integer'",)
    assert "after one repair attempt" in end.error.message


def test_the_deprecated_retry_options_are_still_accepted() -> None:
    provider = OpenAIProvider(model="m", max_retries=0, backoff_base_s=0, backoff_max_s=1)
    assert provider.max_retries == 0

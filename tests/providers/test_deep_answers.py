"""A structured answer nested far deeper than ``max_value_depth`` (SPEC §24): the OpenAI-compatible
provider (a real HTTP server on 127.0.0.1), the command provider (a real child process) and the
``claude`` preset (the fake CLI on PATH) each fail that child with kind ``invalid`` naming
``max_value_depth``; the run goes on, on both engines."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import anyio
import pytest
from _support import ENGINE_SKIPS, local_http, quickjs_factory, send_json, subprocess_factory
from hypothesis import given
from hypothesis import strategies as st

from dsh_workflow import (
    AgentEnded,
    ClaudeCodeProvider,
    CommandProvider,
    EngineConfig,
    OpenAIProvider,
    WorkflowStartRequest,
)
from dsh_workflow._depth import deeper_than, loads_bounded, text_deeper_than

pytestmark = pytest.mark.anyio

FAKES = Path(__file__).resolve().parent / "fake_clis"
DEEP = '{"n": ' + "[" * 1500 + "]" * 1500 + "}"  # 3 kB
SCHEMA = {"type": "object", "properties": {"n": {}}, "required": ["n"]}
SCRIPT = f"""const deep = await agent('DEEP please', {{schema: {json.dumps(SCHEMA)}}});
const fine = await agent('after');
return [deep, typeof fine];"""
ENGINES = {"quickjs": quickjs_factory, "subprocess": subprocess_factory(pool_size=1)}


@pytest.fixture(params=sorted(ENGINES))
def make_engine(request: pytest.FixtureRequest) -> Any:
    factory = ENGINES[request.param]
    if factory is None:
        pytest.skip(ENGINE_SKIPS.get(request.param, "engine unavailable"))
    return factory


class _Chat(BaseHTTPRequestHandler):
    """Answers every chat completion with ``DEEP`` when the prompt asks for it."""

    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        asked = body["messages"][-1]["content"]
        content = DEEP if "DEEP" in asked or "schema" in asked else "plain"
        data = json.dumps({"id": "c", "object": "chat.completion", "choices": [
            {"index": 0, "finish_reason": "stop",
             "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}).encode()
        send_json(self, data)


@pytest.fixture
def openai_url(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    with local_http(_Chat) as base:
        yield base + "/v1"


def _command(tmp_path: Path) -> CommandProvider:
    program = tmp_path / "deep.py"
    program.write_text("import sys\nprompt = sys.stdin.read()\n"
                       f"print({DEEP!r} if 'DEEP' in prompt else 'plain')\n")
    return CommandProvider([sys.executable, str(program)])


def _claude(tmp_path: Path) -> ClaudeCodeProvider:
    env = {"PATH": f"{FAKES}{os.pathsep}{os.environ['PATH']}",
           "CLAUDE_FAKE_LOG": str(tmp_path / "claude.log")}
    return ClaudeCodeProvider(env=env)


PROVIDERS: dict[str, Callable[[Path, str], Any]] = {
    "openai": lambda tmp_path, url: OpenAIProvider(base_url=url, model="test-model",
                                                   api_key="sk-test"),
    "command": lambda tmp_path, url: _command(tmp_path),
    "claude": lambda tmp_path, url: _claude(tmp_path),
}


@pytest.mark.parametrize("kind", sorted(PROVIDERS))
async def test_an_answer_nested_1500_deep_fails_that_child_invalid(
        make_engine: Any, kind: str, tmp_path: Path, openai_url: str) -> None:
    provider = PROVIDERS[kind](tmp_path, openai_url)
    ends: list[AgentEnded] = []
    async with provider if kind == "openai" else _nothing(provider), \
            make_engine(EngineConfig(), provider) as engine:
        engine.events.subscribe(lambda e: ends.append(e) if isinstance(e, AgentEnded) else None)
        run = engine.start(WorkflowStartRequest(meta={"name": "deep", "description": "d"},
                                                script=SCRIPT))
        with anyio.fail_after(60):
            result = await run.result()
        await run.dispose()
    assert result.stop_reason == "completed", result.error
    assert result.value == [None, "string"]  # the deep child failed; the next one ran
    deep = next(e for e in ends if e.seq == 1)
    assert deep.outcome == "failed" and deep.error is not None
    assert deep.error.kind == "invalid", deep.error
    assert "max_value_depth" in deep.error.message, deep.error.message


async def test_an_answer_deeper_than_the_configured_bound_names_it(
        make_engine: Any, tmp_path: Path) -> None:
    """Between the engine's ``max_value_depth`` and the most it allows, the engine's bound
    decides, and its reason names the configured value."""
    program = tmp_path / "mid.py"
    program.write_text("import sys\nsys.stdin.read()\n"
                       "print('{\"n\": ' + '[' * 40 + ']' * 40 + '}')\n")
    provider = CommandProvider([sys.executable, str(program)])
    ends: list[AgentEnded] = []
    async with make_engine(EngineConfig(max_value_depth=16), provider) as engine:
        engine.events.subscribe(lambda e: ends.append(e) if isinstance(e, AgentEnded) else None)
        run = engine.start(WorkflowStartRequest(
            meta={"name": "mid", "description": "d"},
            script=f"return await agent('x', {{schema: {json.dumps(SCHEMA)}}})"))
        with anyio.fail_after(60):
            result = await run.result()
        await run.dispose()
    assert result.stop_reason == "completed" and result.value is None
    assert ends[0].error is not None and ends[0].error.kind == "invalid"
    assert "max_value_depth=16" in ends[0].error.message


class _nothing:
    """``async with`` over a provider that needs no entering."""

    def __init__(self, provider: object) -> None:
        self.provider = provider

    async def __aenter__(self) -> object:
        return self.provider

    async def __aexit__(self, *exc: object) -> None:
        return None


def test_the_depth_of_json_text_is_measured_without_recursion() -> None:
    assert text_deeper_than("[" * 100_000, 512)
    assert not text_deeper_than('["' + "[" * 5000 + '"]', 2)  # brackets in a string
    assert not text_deeper_than('["\\"[[[[", 1]', 1)  # an escaped quote does not end it
    assert text_deeper_than("[[1]]", 1) and not text_deeper_than("[[1]]", 2)
    with pytest.raises(ValueError, match="nested deeper than 512 levels"):
        loads_bounded(DEEP)
    with pytest.raises(ValueError):
        loads_bounded("[" * 600)
    assert loads_bounded(b'{"a": [1, "]]"]}') == {"a": [1, "]]"]}


_JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.text(alphabet='[]{}"\\ab'),
                     lambda inner: st.lists(inner, max_size=3)
                     | st.dictionaries(st.text(alphabet='[]{}"\\ab', max_size=4), inner,
                                       max_size=3), max_leaves=30)


@given(_JSON, st.integers(min_value=0, max_value=12))
def test_the_text_depth_agrees_with_the_value_depth(value: Any, limit: int) -> None:
    assert text_deeper_than(json.dumps(value), limit) == deeper_than(value, limit)

"""Provider fault injection: every way a (trusted but buggy) provider can misbehave.

Providers are the user's code, so the engine trusts them not to be malicious — but not to be
correct. Each test injects one fault into the subagent seam and proves what the run, the
script and the events see, on every engine and both async backends:

* a provider that raises is an infrastructure fault: fatal ``AGENT_FAILED`` naming the
  exception, catchable by the script, propagating through ``parallel()`` to fail the run;
* a provider that hangs is cancelled by ``agent_timeout_s`` (``agent()`` resolves ``null``,
  outcome ``timeout``) or, without one, by cancelling the run (the child sees the cancel);
* a provider that ignores cancellation for a while (a shielded sleep) neither delays
  ``dispose()`` beyond ``dispose_grace_s`` nor produces a second ``AgentEnded`` when it
  finally returns;
* a provider that returns the wrong type, huge text, text with NUL and lone surrogates (the
  script sees them; a returned one becomes U+FFFD with a warning), a
  structured value violating the schema or one that is not JSON data (a set, NaN, a cycle,
  nesting deeper than Python's JSON recursion) never crashes anything: the script gets the
  value, ``null`` (outcome ``failed``) or a clear error naming the bound.

Every test also checks the event contract for every run and that no engine thread or sandbox
process is left once the engine block has exited.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import pytest
from _support import (
    ENGINE_SKIPS,
    EngineFactory,
    await_none_left,
    child_pids,
    quickjs_factory,
    subprocess_factory,
)

from dsh_workflow import (
    AgentEnded,
    EngineConfig,
    SubagentRequest,
    SubagentResult,
    WorkflowEngine,
    WorkflowEvent,
    WorkflowResult,
    WorkflowRun,
    WorkflowStartRequest,
)
from dsh_workflow.testing import (
    FailingProvider,
    FunctionProvider,
    HangingProvider,
    check_run_events,
)

pytestmark = pytest.mark.anyio

META = {"name": "faults", "description": "a provider fault test"}
BASE = {"slice_cpu_limit_s": 0.5, "dispose_grace_s": 0.5, "max_concurrent_agents": 4}
MARGIN_S = 0.5
SCHEMA = {"type": "object", "properties": {"v": {"type": "string"}}, "required": ["v"]}



# ---- engines and the harness ---------------------------------------------------------------

_SUBPROCESS = subprocess_factory(pool_size=1)
_SKIP = ENGINE_SKIPS.get("subprocess", "")
_quickjs = quickjs_factory


@pytest.fixture(params=[
    pytest.param(_quickjs, id="quickjs"),
    pytest.param(_SUBPROCESS, id="subprocess",
                 marks=[pytest.mark.skip(reason=_SKIP)] if _SUBPROCESS is None else []),
])
def make_engine(request: pytest.FixtureRequest) -> EngineFactory:
    return request.param  # type: ignore[no-any-return]  # pytest's param is untyped


def engine_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("dsh-workflow")}


@dataclass
class Harness:
    engine: WorkflowEngine
    config: EngineConfig
    events: list[WorkflowEvent] = field(default_factory=list)
    runs: list[WorkflowRun] = field(default_factory=list)

    def start(self, script: str, **fields: Any) -> WorkflowRun:
        run = self.engine.start(WorkflowStartRequest(meta=META, script=script, **fields))
        self.runs.append(run)
        return run

    async def run(self, script: str, **fields: Any) -> WorkflowResult:
        return await self.result(self.start(script, **fields))

    async def result(self, run: WorkflowRun) -> WorkflowResult:
        with anyio.fail_after(15):
            result = await run.result()
        assert (result.error is None) == (result.stop_reason == "completed"), result
        return result

    def outcomes(self, run: WorkflowRun) -> list[str]:
        return [e.outcome for e in self.events if isinstance(e, AgentEnded) and e.run.id == run.id]


@asynccontextmanager
async def harness(make_engine: EngineFactory, provider: Any, **config: Any) \
        -> AsyncIterator[Harness]:
    """The engine under test; afterwards: every run disposed and event-checked, nothing left."""
    threads, pids = engine_threads(), child_pids()
    cfg = EngineConfig(**{**BASE, **config})
    async with make_engine(cfg, provider) as engine:
        h = Harness(engine, cfg)
        engine.events.subscribe(h.events.append)
        yield h
        for run in h.runs:
            with anyio.fail_after(cfg.dispose_grace_s + MARGIN_S + 1):
                await run.dispose()
            check_run_events(h.events, run, await h.result(run))
    settle_s = 3 * cfg.slice_cpu_limit_s + 3
    await await_none_left(lambda: {t.name for t in engine_threads() - threads},
                          what="the engine threads left behind to end", timeout=settle_s)
    await await_none_left(lambda: child_pids() - pids,
                          what="the sandbox processes left behind to end", timeout=settle_s)

# ---- a provider that raises ----------------------------------------------------------------


class Unprintable(Exception):
    """An exception whose str() itself raises."""

    def __str__(self) -> str:
        raise ValueError("no text for you")


async def test_raising_provider_fails_the_run_with_agent_failed(make_engine: EngineFactory) \
        -> None:
    provider = FailingProvider(lambda: ConnectionError("upstream reset"))
    async with harness(make_engine, provider) as h:
        run = h.start("return await agent('x')")
        result = await h.result(run)
        assert result.stop_reason == "error"
        assert result.error is not None, result
        assert result.error_code == "AGENT_FAILED" and result.error.startswith("AGENT_FAILED:"), result.error
        assert "ConnectionError" in result.error and "upstream reset" in result.error
        assert result.agents_started == 1 and h.outcomes(run) == ["failed"]


async def test_raising_provider_error_is_catchable_and_fatal(make_engine: EngineFactory) -> None:
    async with harness(make_engine, FailingProvider()) as h:
        result = await h.run("""
            try { await agent('x'); return 'no throw'; }
            catch (e) { return [e.name, e.code, e.fatal, e.message]; }""")
        assert result.value == ["WorkflowError", "AGENT_FAILED", True,
                                "agent() failed: the subagent provider raised RuntimeError: "
                                "provider exploded"]


async def test_raising_provider_fails_the_run_through_parallel(make_engine: EngineFactory) \
        -> None:
    def handler(request: SubagentRequest) -> str:
        if request.prompt == "bad":
            raise KeyError("missing credentials")
        return "fine"

    async with harness(make_engine, FunctionProvider(handler)) as h:
        run = h.start("""
            const r = await parallel([() => agent('good'), () => agent('bad'), () => 'plain']);
            return r;""")
        result = await h.result(run)
        assert result.error is not None, result
        assert (result.error_code == "AGENT_FAILED"
                and result.error.startswith("AGENT_FAILED:")) and "KeyError" in result.error, result
        assert sorted(h.outcomes(run)) == ["completed", "failed"]


async def test_provider_exception_that_cannot_be_rendered(make_engine: EngineFactory) -> None:
    async with harness(make_engine, FailingProvider(Unprintable)) as h:
        result = await h.run("return await agent('x')")
        assert result.error is not None, result
        assert result.error_code == "AGENT_FAILED" and result.error.startswith("AGENT_FAILED:"), result
        assert "provider raised Unprintable" in result.error, result.error

# ---- a provider that hangs -----------------------------------------------------------------


async def test_hanging_provider_times_out_to_null(make_engine: EngineFactory) -> None:
    hanging = HangingProvider()
    async with harness(make_engine, hanging, agent_timeout_s=0.2) as h:
        began = time.monotonic()
        run = h.start("const r = await agent('slow'); return {r, after: await agent('slow2')}")
        result = await h.result(run)
        assert result.value == {"r": None, "after": None}
        assert h.outcomes(run) == ["timeout", "timeout"]
        assert hanging.cancellations == 2
        assert time.monotonic() - began < 0.4 + 2 * MARGIN_S


async def test_hanging_provider_is_freed_by_cancel(make_engine: EngineFactory) -> None:
    hanging = HangingProvider()
    async with harness(make_engine, hanging) as h:
        run = h.start("return await parallel([() => agent('a'), () => agent('b')])")
        await hanging.wait_started(2)
        run.cancel("the user gave up")
        result = await h.result(run)
        assert result.error is not None, result
        assert result.stop_reason == "cancelled" and "the user gave up" in result.error
        await hanging.wait_cancelled(2)
        assert hanging.running == 0
        assert h.outcomes(run) == ["cancelled", "cancelled"]

# ---- a provider that ignores cancellation for a while ---------------------------------------


class Stubborn:
    """Shields itself from cancellation for ``hold_s`` seconds, then answers."""

    def __init__(self, hold_s: float) -> None:
        self.hold_s = hold_s
        self.started = anyio.Event()
        self.returned = anyio.Event()

    async def run(self, request: SubagentRequest) -> SubagentResult:
        self.started.set()
        with anyio.CancelScope(shield=True):
            await anyio.sleep(self.hold_s)
        self.returned.set()
        return SubagentResult(text="late answer")


async def test_stubborn_provider_does_not_delay_dispose(make_engine: EngineFactory) -> None:
    stubborn = Stubborn(hold_s=0.5)
    async with harness(make_engine, stubborn, dispose_grace_s=0.2) as h:
        run = h.start("return await agent('x')")
        await stubborn.started.wait()
        began = time.monotonic()
        await run.dispose()
        assert time.monotonic() - began < 0.2 + MARGIN_S, "dispose() overran dispose_grace_s"
        result = await h.result(run)
        assert result.stop_reason == "cancelled", result
        with anyio.fail_after(2):
            await stubborn.returned.wait()
        await anyio.sleep(0.05)  # let a (wrong) second end event surface
        assert h.outcomes(run) == ["cancelled"], "one AgentEnded, even after the late return"


async def test_stubborn_provider_under_agent_timeout(make_engine: EngineFactory) -> None:
    stubborn = Stubborn(hold_s=0.4)
    async with harness(make_engine, stubborn, agent_timeout_s=0.1) as h:
        run = h.start("return await agent('x')")
        result = await h.result(run)
        # The shielded child cannot be stopped, so it finishes; what counts is one paired end
        # and a value the script could have received either way.
        assert result.stop_reason == "completed" and result.value in (None, "late answer")
        assert h.outcomes(run) in (["timeout"], ["completed"])

# ---- wrong results -------------------------------------------------------------------------


class WrongType:
    """Returns whatever it was given instead of a SubagentResult."""

    def __init__(self, value: Any) -> None:
        self.value = value

    async def run(self, request: SubagentRequest) -> Any:
        return self.value


class NotAsync:
    """``run`` is a plain function: its result cannot be awaited."""

    def run(self, request: SubagentRequest) -> SubagentResult:
        return SubagentResult(text="sync")


@pytest.mark.parametrize(("value", "shown"), [
    pytest.param("just text", "str", id="str"),
    pytest.param({"text": "a dict"}, "dict", id="dict"),
    pytest.param(None, "NoneType", id="none"),
    pytest.param(SubagentRequest, "ModelMetaclass", id="a-class"),
])
async def test_wrong_result_type_is_agent_failed(make_engine: EngineFactory, value: Any,
                                                 shown: str) -> None:
    async with harness(make_engine, WrongType(value)) as h:
        run = h.start("return await agent('x')")
        result = await h.result(run)
        assert result.error is not None, result
        assert result.error_code == "AGENT_FAILED" and result.error.startswith("AGENT_FAILED:"), result
        assert f"returned {shown}, not a SubagentResult" in result.error, result.error
        assert h.outcomes(run) == ["failed"]


async def test_provider_whose_run_is_not_async(make_engine: EngineFactory) -> None:
    async with harness(make_engine, NotAsync()) as h:
        result = await h.run("try { return await agent('x'); } catch (e) { return e.code; }")
        assert result.value == "AGENT_FAILED"


async def test_huge_text_reaches_the_script(make_engine: EngineFactory) -> None:
    provider = FunctionProvider(lambda request: "x" * 10_000_000)
    async with harness(make_engine, provider) as h:
        result = await h.run("const t = await agent('x'); return [t.length, t.slice(0, 3)]")
        assert result.value == [10_000_000, "xxx"]


async def test_huge_text_beyond_the_heap_fails_with_the_memory_bound(
        make_engine: EngineFactory) -> None:
    provider = FunctionProvider(lambda request: "x" * 10_000_000)
    async with harness(make_engine, provider, memory_limit_bytes=16 * 1024 * 1024) as h:
        result = await h.run("return (await agent('x')).length")
        assert result.error is not None, result
        assert result.error_code == "RESOURCE_LIMIT" and result.error.startswith("RESOURCE_LIMIT:"), result
        assert "memory_limit_bytes=16777216" in result.error


async def test_text_with_nul_and_lone_surrogates_crosses_intact(make_engine: EngineFactory) \
        -> None:
    text = "a\x00b\ud800c\u2028d\U0001f600"
    async with harness(make_engine, FunctionProvider(lambda request: text)) as h:
        result = await h.run("const t = await agent('x'); return [t, t.length]")
        # the script sees the text intact (the emoji is two UTF-16 code units in JavaScript);
        # the value leaving the run is text UTF-8 can hold, with a warning (SPEC §24)
        assert result.value == [text.replace("\ud800", "\ufffd"), 9]
        assert result.warnings == ("return value[0]: a lone surrogate became U+FFFD",)


@pytest.mark.parametrize("structured", [
    pytest.param({"v": 1}, id="wrong-type"),
    pytest.param({}, id="missing-required"),
    pytest.param(["not", "an", "object"], id="array"),
    pytest.param(None, id="absent"),
])
async def test_schema_violation_is_null_and_failed(make_engine: EngineFactory,
                                                   structured: Any) -> None:
    provider = FunctionProvider(lambda request: SubagentResult(structured=structured))
    async with harness(make_engine, provider) as h:
        run = h.start(f"const r = await agent('x', {{schema: {SCHEMA!r}}}); "
                      "return {r, next: 'continued'}")
        result = await h.result(run)
        assert result.value == {"r": None, "next": "continued"}
        assert h.outcomes(run) == ["failed"]


def _cycle() -> dict[str, Any]:
    value: dict[str, Any] = {"v": "x"}
    value["self"] = value
    return value


def _deep(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {"v": "x"}
    for _ in range(levels):
        value = {"v": "x", "a": value}
    return value


@pytest.mark.parametrize("structured", [
    pytest.param(lambda: {"v": "x", "s": {1, 2}}, id="set"),
    pytest.param(lambda: {"v": "x", "n": math.nan}, id="nan"),
    pytest.param(lambda: {"v": "x", "n": math.inf}, id="inf"),
    pytest.param(lambda: {"v": "x", "o": object()}, id="object"),
    pytest.param(lambda: {"v": "x", "b": b"bytes"}, id="bytes"),
    pytest.param(_cycle, id="cycle"),
    pytest.param(lambda: _deep(100_000), id="deeper-than-python-json"),
])
async def test_non_json_structured_value_is_null_and_failed(
        make_engine: EngineFactory, structured: Callable[[], Any]) -> None:
    provider = FunctionProvider(lambda request: SubagentResult.model_construct(
        stop_reason="completed", text="plain text", structured=structured(), error=None,
        usage=None))
    async with harness(make_engine, provider) as h:
        run = h.start(f"const r = await agent('x', {{schema: {SCHEMA!r}}}); "
                      "return {r, next: await agent('y')}")
        result = await h.result(run)
        assert result.value == {"r": None, "next": "plain text"}, result
        assert h.outcomes(run) == ["failed", "completed"]


async def test_ordinary_failure_is_null(make_engine: EngineFactory) -> None:
    provider = FunctionProvider(lambda request: SubagentResult(stop_reason="max_tokens",
                                                               error="ran out of tokens"))
    async with harness(make_engine, provider) as h:
        run = h.start("return [await agent('x'), await agent('y', {schema: "
                      f"{SCHEMA!r}}})]")
        result = await h.result(run)
        assert result.value == [None, None]
        assert h.outcomes(run) == ["failed", "failed"]


async def test_a_lone_surrogate_in_a_failure_fails_only_that_child(
        make_engine: EngineFactory) -> None:
    """Half an emoji in a provider's error text, and in the script's labels, phases and logs:
    the child fails with the reason shown as U+FFFD; nothing becomes an engine fault."""
    provider = FunctionProvider(lambda request: SubagentResult(
        stop_reason="error", error="broke \ud83d here") if "bad" in request.prompt
        else "fine \ud83d")
    async with harness(make_engine, provider) as h:
        run = h.start("phase('p \\ud83d'); log('l \\ud83d');\n"
                      "return [await agent('bad', {label: 'x \\udc00'}), await agent('ok')]")
        result = await h.result(run)
        assert result.stop_reason == "completed", result.error
        assert result.value == [None, "fine \ufffd"] and result.agents_failed == 1
        ended = [e for e in h.events if isinstance(e, AgentEnded) and e.run.id == run.id]
        assert ended[0].error is not None and ended[0].error.message == "broke \ufffd here"
        assert ended[0].label == "x \ufffd"
        texts = [getattr(e, "message", None) or getattr(e, "title", None) for e in h.events]
        assert "p \ufffd" in texts and "l \ufffd" in texts


class RaisesWhenCancelled:
    """Turns its cancellation into an ordinary exception (a common provider bug)."""

    def __init__(self) -> None:
        self.started = anyio.Event()

    async def run(self, request: SubagentRequest) -> SubagentResult:
        self.started.set()
        try:
            await anyio.sleep_forever()
        except anyio.get_cancelled_exc_class():
            raise RuntimeError("connection closed while cancelling") from None
        raise AssertionError("unreachable")


async def test_provider_raising_on_cancel_still_ends_cancelled(make_engine: EngineFactory) \
        -> None:
    provider = RaisesWhenCancelled()
    async with harness(make_engine, provider) as h:
        run = h.start("return await agent('x')")
        with anyio.fail_after(5):
            await provider.started.wait()
        run.cancel("stop now")
        result = await h.result(run)
        assert result.error is not None, result
        assert result.stop_reason == "cancelled" and "stop now" in result.error
        assert h.outcomes(run) == ["cancelled"]

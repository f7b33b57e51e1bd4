"""The runtime's end path, caps, limit verdicts and error texts, on both engines.

Each test names the defect it guards against: a run that ended without a result when the
script threw something whose rendering throws; caps bypassed through replaced intrinsics or a
Proxy's shifting length; limit verdicts read off error text; error texts that were empty, read
like the engine's own or lost their message line; the boundary running out of stack inside its
own cap; a revoked Proxy crashing a hook's argument check.
"""

from __future__ import annotations

import json
from contextlib import AbstractAsyncContextManager
from typing import Any

import anyio
import pytest
from _support import TIGHT_CONFIG, both_engines, quickjs_factory
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from dsh_workflow import (
    EngineConfig,
    LogEmitted,
    QuickJSEngine,
    WorkflowEngine,
    WorkflowError,
    WorkflowErrorCode,
    WorkflowStartRequest,
)
from dsh_workflow._depth import STACK_BYTES_PER_LEVEL, deeper_than
from dsh_workflow._errors import SCRIPT_FAILED
from dsh_workflow.testing import FunctionProvider, HangingProvider

pytestmark = pytest.mark.anyio

META = {"name": "hardening", "description": "runtime hardening checks"}
CONFIG = TIGHT_CONFIG
ENGINES = both_engines()


def request(script: str, **kwargs: Any) -> WorkflowStartRequest:
    return WorkflowStartRequest(meta=META, script=script, **kwargs)


async def run_script(factory: Any, script: str, *, config: EngineConfig = CONFIG,
                     provider: Any = None, timeout: float = 10.0) -> Any:
    engine: AbstractAsyncContextManager[WorkflowEngine] = factory(
        config, provider or FunctionProvider(lambda r: "ok:" + r.prompt))
    async with engine as eng:
        run = eng.start(request(script))
        with anyio.fail_after(timeout):
            return await run.result()


# ---- 3. the end path ------------------------------------------------------------------------

SELF_THROWING_PROXY = """
const handler = {};
const bomb = new Proxy({}, handler);
for (const trap of ['get', 'has', 'ownKeys', 'getOwnPropertyDescriptor', 'getPrototypeOf']) {
  handler[trap] = () => { throw bomb; };
}
"""


@pytest.mark.parametrize("factory", ENGINES)
@pytest.mark.parametrize("ending", [
    "throw bomb;",
    "return {get a() { throw bomb; }};",
    "const {proxy, revoke} = Proxy.revocable({}, {}); revoke(); throw proxy;",
    "let e; try { await agent(''); } catch (x) { e = x; }\n"
    "Object.defineProperty(e, 'message', {get() { throw bomb; }}); e.toString = () => { throw bomb; };\n"
    "throw e;",
])
async def test_the_run_ends_with_one_result_while_a_child_is_still_in_flight(
        factory: Any, ending: str) -> None:
    """Whatever the body threw, its run ends at once even though a child never finishes (it
    used to wait forever with the default run_timeout_s=None)."""
    hanging = HangingProvider()
    script = SELF_THROWING_PROXY + "agent('never answered');\n" + ending
    result = await run_script(factory, script, provider=hanging, timeout=5.0)
    assert result.stop_reason == "error"
    assert result.error and "STALLED" not in result.error
    assert "nothing will ever settle" not in result.error


# ---- 4. caps ----------------------------------------------------------------------------------


@pytest.mark.parametrize("factory", ENGINES)
async def test_log_truncation_survives_replaced_string_methods(factory: Any) -> None:
    events: list[Any] = []
    engine = factory(CONFIG, FunctionProvider(lambda r: "ok"))
    async with engine as eng:
        eng.events.subscribe(events.append)
        run = eng.start(request(
            "String.prototype.slice = function () { return String(this); };\n"
            "String.prototype.substring = String.prototype.slice;\n"
            "log('x'.repeat(200000)); phase('p'.repeat(200000)); return 1;"))
        with anyio.fail_after(10):
            result = await run.result()
    assert result.value == 1
    texts = [e.message for e in events if isinstance(e, LogEmitted)]
    assert texts and all(len(t) <= CONFIG.max_log_chars + 20 for t in texts)


@pytest.mark.parametrize("factory", ENGINES)
async def test_item_cap_uses_one_reading_of_a_proxy_length(factory: Any) -> None:
    config = CONFIG.model_copy(update={"max_items_per_call": 4})
    result = await run_script(factory, """
      const thunks = Array.from({length: 50}, (_, i) => () => i);
      let reads = 0;
      const shifty = new Proxy(thunks, {get(t, k) { return k === 'length' ? (reads++ ? 50 : 2) : t[k]; }});
      return await parallel(shifty);""", config=config)
    assert result.value == [0, 1]


async def test_the_host_enforces_the_log_and_prompt_caps_itself() -> None:
    """A runtime that sends text over the caps (as a replaced intrinsic once made it) is cut
    and refused by the host on its own."""
    from dsh_workflow._engines.host.host import HostedRun

    events: list[Any] = []
    settled: list[list[Any]] = []

    class Runtime:
        def start(self) -> None: ...
        def settle(self, entry: list[Any]) -> None: settled.append(entry)
        def stop(self) -> None: ...
        def is_alive(self) -> bool: return False

    from dsh_workflow._events import EventHub
    hub = EventHub()
    hub.subscribe(events.append)
    config = CONFIG.model_copy(update={"max_prompt_chars": 10})
    async with anyio.create_task_group() as tg:
        run = HostedRun(run_id="r", meta=META, config=config,  # type: ignore[arg-type]  # a stand-in for the real argument
                        provider=FunctionProvider(lambda r: "ok"), max_total_agents=5,
                        parent=None, events=hub, task_group=tg)
        run.attach(Runtime())
        run.launch()
        run.report("outbox", json.dumps([["log", "L" * 50_000], ["agent", 1, "P" * 11, None]]))
        run.report("end", {"ok": True, "value": 1})
        await run.result()
    logs = [e.message for e in events if isinstance(e, LogEmitted)]
    assert len(logs[0]) <= config.max_log_chars + 20 and logs[0].endswith("[truncated]")
    assert settled[0][:3] == [1, False, "INVALID_ARGUMENT"]
    assert "max_prompt_chars=10" in settled[0][3]


# ---- 5. limit verdicts --------------------------------------------------------------------


@pytest.mark.parametrize("factory", ENGINES)
@pytest.mark.parametrize(("script", "fragment"), [
    ("throw new InternalError('interrupted');", "InternalError: interrupted"),
    ("throw new InternalError('out of memory');", "InternalError: out of memory"),
    ("throw RangeError('Maximum call stack size exceeded');", "Maximum call stack size"),
    ("class X extends InternalError {}; throw new X('out of memory');", "out of memory"),
    ("throw Object.create(InternalError.prototype, {message: {value: 'out of memory'}});",
     "not an Error"),
    ("throw {name: 'InternalError', message: 'interrupted'};", "not an Error"),
    ("throw null;", "threw null"),
])
async def test_look_alike_limit_errors_are_the_scripts_own(factory: Any, script: str,
                                                           fragment: str) -> None:
    result = await run_script(factory, script)
    assert result.stop_reason == "error"
    assert not result.error.startswith("RESOURCE_LIMIT"), result.error
    assert result.error_code == SCRIPT_FAILED, result
    assert fragment in result.error


@pytest.mark.parametrize("factory", ENGINES)
@pytest.mark.parametrize(("script", "setting"), [
    ("for (;;) {}", "slice_cpu_limit_s=0.3"),
    ("const a = []; for (;;) a.push('x'.repeat(4096) + a.length);", "memory_limit_bytes="),
    ("function f() { return f() + 1; } return f();", "stack_limit_bytes="),
    ("const e = new Error('x'); e.toString = function t() { return t(); }; throw e;",
     "stack_limit_bytes="),
])
async def test_real_limits_keep_their_verdicts(factory: Any, script: str, setting: str) -> None:
    result = await run_script(factory, script)
    assert result.error_code == "RESOURCE_LIMIT" and result.error.startswith("RESOURCE_LIMIT:"), result.error
    assert setting in result.error


async def test_error_constructors_still_behave_like_the_originals() -> None:
    result = await run_script(quickjs_factory, """
      const e = new RangeError('r'); class Mine extends InternalError {}
      return [e instanceof RangeError, e.constructor === RangeError, RangeError.name,
        RangeError.length, Object.getPrototypeOf(RangeError) === Error,
        RangeError.prototype.constructor === RangeError, new Mine('m') instanceof InternalError,
        String(RangeError('plain')), Error.isError(e), typeof InternalError];""")
    assert result.value == [True, True, "RangeError", 1, True, True, True,
                            "RangeError: plain", True, "function"]


# ---- 6. error texts -----------------------------------------------------------------------


@pytest.mark.parametrize("factory", ENGINES)
@pytest.mark.parametrize(("script", "expected"), [
    ("throw 'null';", 'the script threw a string, not an Error: "null"'),
    ("throw ' \\t ';", 'the script threw a string, not an Error: " \\t "'),
    ("throw 7;", "the script threw a number, not an Error: 7"),
    ("const e = new Error(''); e.name = ''; Object.defineProperty(e, 'stack', {value: ''}); "
     "throw e;", "[an Error with no name and no message]"),
    ("const e = new Error('x'); e.name = 'AGENT_CAP'; throw e;",
     "the script's own error: AGENT_CAP: x"),
])
async def test_error_texts_name_what_was_thrown(factory: Any, script: str,
                                                expected: str) -> None:
    result = await run_script(factory, script)
    assert result.error.split("\n", 1)[0] == expected


@pytest.mark.parametrize("factory", ENGINES)
async def test_a_message_that_mentions_a_position_keeps_its_line(factory: Any) -> None:
    result = await run_script(factory, "throw new Error('bad input at <input>:1:1 and workflow:x:2:3');")
    first, *frames = result.error.split("\n")
    assert first == "Error: bad input at <input>:1:1 and workflow:x:2:3"
    assert frames and all("workflow:hardening:" in line for line in frames)


# ---- 7. the boundary's stack ----------------------------------------------------------------


def test_stack_and_depth_are_validated_as_a_pair() -> None:
    with pytest.raises(ValidationError, match="max_value_depth=512"):
        EngineConfig(stack_limit_bytes=64 * 1024, max_value_depth=512)
    EngineConfig(stack_limit_bytes=STACK_BYTES_PER_LEVEL * 512, max_value_depth=512)


@pytest.mark.parametrize("factory", ENGINES)
@pytest.mark.parametrize("kind", ["[v]", "{a: v}"])
async def test_values_at_the_depth_cap_cross_under_the_smallest_stack(factory: Any,
                                                                      kind: str) -> None:
    depth = 64 * 1024 // STACK_BYTES_PER_LEVEL
    config = CONFIG.model_copy(update={"stack_limit_bytes": 64 * 1024, "max_value_depth": depth})
    script = f"let v = 1; for (let i = 0; i < {depth}; i++) v = {kind}; return v;"
    result = await run_script(factory, script, config=config)
    assert result.stop_reason == "completed", result.error
    over = await run_script(factory, script.replace(f"i < {depth}", f"i < {depth + 1}"),
                            config=config)
    assert over.error_code == "RESULT_UNSERIALIZABLE" and over.error.startswith("RESULT_UNSERIALIZABLE:")
    assert f"max_value_depth={depth}" in over.error


async def test_args_deeper_than_the_cap_are_refused_at_start() -> None:
    deep: Any = 1
    for _ in range(CONFIG.max_value_depth + 1):
        deep = [deep]
    async with QuickJSEngine(CONFIG, provider=FunctionProvider(lambda r: "ok")) as eng:
        with pytest.raises(WorkflowError) as info:
            eng.start(request("return args", args=deep))
    assert info.value.code == WorkflowErrorCode.INVALID_ARGUMENT
    assert f"max_value_depth={CONFIG.max_value_depth}" in str(info.value)


def test_depth_is_measured_without_recursion() -> None:
    deep: Any = {}
    for _ in range(100_000):
        deep = {"a": deep}
    assert deeper_than(deep, 99_999) and not deeper_than(deep, 100_001)
    assert not deeper_than("text", 0) and deeper_than([[]], 1) and not deeper_than([[]], 2)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**53, 2**53) | st.text(max_size=8)
    | st.floats(allow_nan=False, allow_infinity=False, width=32),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=5), children, max_size=4),
    max_leaves=30)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(value=json_values)
async def test_the_iterative_boundary_copies_json_data_exactly(value: Any) -> None:
    """materialize (now a loop, not recursion) returns what JSON.stringify would."""
    async with QuickJSEngine(CONFIG, provider=FunctionProvider(lambda r: "ok")) as eng:
        run = eng.start(request(
            "return {copy: args.v, text: JSON.stringify(args.v)};", args={"v": value}))
        result = await run.result()
    assert result.stop_reason == "completed", result.error
    assert result.value.get("copy") == json.loads(result.value["text"])
    assert _numbers_as_floats(result.value["copy"]) == _numbers_as_floats(value)


def _numbers_as_floats(value: Any) -> Any:
    """JSON data with every number as a float (JavaScript prints 2.07e16 as an integer)."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, list):
        return [_numbers_as_floats(v) for v in value]
    return {k: _numbers_as_floats(v) for k, v in value.items()}


# ---- 8. revoked proxies -------------------------------------------------------------------


@pytest.mark.parametrize("factory", ENGINES)
@pytest.mark.parametrize("call", [
    "agent(proxy)", "agent('x', proxy)", "log(proxy)", "phase(proxy)", "parallel(proxy)",
    "parallel([proxyFn])", "pipeline(proxy, (x) => x)", "pipeline([1], proxyFn)",
])
async def test_a_revoked_proxy_is_a_fatal_misuse_not_a_swallowed_type_error(
        factory: Any, call: str) -> None:
    result = await run_script(factory, f"""
      const r1 = Proxy.revocable({{}}, {{}}); r1.revoke(); const proxy = r1.proxy;
      const r2 = Proxy.revocable(() => 1, {{}}); r2.revoke(); const proxyFn = r2.proxy;
      return await parallel([async () => {call}]);""")
    assert (result.error is not None and result.error_code == "INVALID_ARGUMENT"
            and result.error.startswith("INVALID_ARGUMENT:")), result.error
    assert "revoked Proxy" in result.error


# ---- the body's wrapper -----------------------------------------------------------------------


@pytest.mark.parametrize(("prologue", "strict"), [
    ("'use strict';\n", True), ('// a comment\n"use strict"\n', True), ("", False),
    ("const s = 'use strict';\n", False),
])
async def test_the_body_keeps_its_use_strict_directive(prologue: str, strict: bool) -> None:
    """The runtime runs the body inside try/catch (for its heap probe); a leading "use strict"
    directive must still make the body strict."""
    result = await run_script(quickjs_factory,
                              prologue + "return (function () { return this === undefined; })();")
    assert result.value is strict

"""Bounds of the schema gate and of value validation (hostile schemas, patterns and values).

The gate's size limits, its verdict cache, the pattern-cost analysis, the step budget of value
validation, and, on both engines and both backends, that none of it holds the event loop and
that calls stay admitted in call order around the gate's worker thread.
"""

from __future__ import annotations

import gc
import time
import uuid
from typing import Any

import anyio
import pytest
from _support import quickjs_factory, subprocess_factory
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_workflow import (
    AgentStarted,
    EngineConfig,
    SubagentRequest,
    SubagentResult,
    WorkflowEvent,
    WorkflowStartRequest,
)
from dsh_workflow._patterns import PatternRefused, pattern_cost
from dsh_workflow._schema import (
    DEFAULT_LIMITS,
    PATTERN_BUDGET_S,
    SchemaLimits,
    _canonical,
    bounded_search,
    finish_schema_check,
    prepare_schema_check,
    schema_violations,
    validation_budget,
    value_violations,
)
from dsh_workflow.testing import FunctionProvider, check_run_events

META = {"name": "bounds", "description": "schema bounds"}
ENGINES = {"quickjs": quickjs_factory, "subprocess": subprocess_factory(pool_size=1)}


def _fresh() -> str:
    return "f" + uuid.uuid4().hex[:12]


def _fanout(n: int, keyword: str = "anyOf") -> dict[str, Any]:
    defs: dict[str, Any] = {f"d{i}": {keyword: [{"$ref": f"#/$defs/d{i + 1}"}] * 2} for i in range(n)}
    defs[f"d{n}"] = {"type": "string", "minLength": 5}
    return {"type": "object", "$defs": defs, "properties": {"a": {"$ref": "#/$defs/d0"}},
            "required": ["a"]}


def _wide(count: int, salt: str = "p") -> dict[str, Any]:
    return {"type": "object", "properties": {f"{salt}{i}": {"type": "string"} for i in range(count)}}


def _rss_bytes() -> int:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * 4096


# -- size limits ------------------------------------------------------------------------------


def test_node_limit_names_the_setting() -> None:
    schema = _wide(300)  # 2 + 300 * 2 + 1 JSON values
    assert schema_violations(schema) == []
    [violation] = schema_violations(schema, SchemaLimits(max_schema_nodes=500))
    assert violation.startswith("schema: too large") and "max_schema_nodes=500" in violation


def test_char_limit_is_exact_on_the_canonical_text() -> None:
    schema = {"type": "object", "description": ""}
    base = len(_canonical(schema))
    schema["description"] = "x" * (5_000 - base)
    assert len(_canonical(schema)) == 5_000
    assert schema_violations(schema, SchemaLimits(max_schema_chars=5_000)) == []
    [violation] = schema_violations(schema, SchemaLimits(max_schema_chars=4_999))
    assert "max_schema_chars=4999" in violation


@pytest.mark.parametrize("schema", [
    {"type": "object", "enum": list(range(3_000_000))},
    {"type": "object", "description": "x" * 30_000_000},
    {"type": "object", "properties": {f"p{i}": {} for i in range(500_000)}},
])
def test_the_size_walk_is_bounded_whatever_the_schema(schema: dict[str, Any]) -> None:
    started = time.perf_counter()
    ticket = prepare_schema_check(schema)
    assert time.perf_counter() - started < 0.05
    assert ticket.violations is not None and "too large" in ticket.violations[0]


def test_worst_schema_within_the_limits_is_checked_in_bounded_time() -> None:
    schema = {"type": "object", "properties": {f"{_fresh()}{i}": {} for i in range(495)}}
    started = time.perf_counter()
    ticket = prepare_schema_check(schema)
    assert time.perf_counter() - started < 0.05  # the part that runs on the event loop
    assert ticket.violations is None
    assert finish_schema_check(ticket) == ()
    assert time.perf_counter() - started < 3  # about 0.25 s on the loaded reference machine


# -- the verdict cache --------------------------------------------------------------------------


def test_verdicts_are_cached_by_canonical_text() -> None:
    name = _fresh()
    schema = {"type": "object", "properties": {name: {"type": "string"}}, "required": [name]}
    ticket = prepare_schema_check(schema)
    assert ticket.violations is None  # never seen: must be checked
    assert finish_schema_check(ticket) == ()
    same = {"required": [name], "properties": {name: {"type": "string"}}, "type": "object"}
    assert prepare_schema_check(same).violations == ()  # cached, whatever the key order
    other_limits = SchemaLimits(max_pattern_cost=1_000)
    assert prepare_schema_check(same, other_limits).violations is None  # limits are in the key


def test_refusals_are_cached_too() -> None:
    schema = {"type": "object", "properties": {_fresh(): {"type": "strnig"}}}
    verdict = finish_schema_check(prepare_schema_check(schema))
    assert verdict and "strnig" in verdict[0]
    assert prepare_schema_check(schema).violations == verdict


# -- patterns -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("pattern", "cost"), [
    ("^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", 38),
    (r"^\d{4}-\d{2}-\d{2}$", 12),
    ("(?:(?:a{20}){20}){20}", 9_260),
    ("a{1,60000}", 1),
    (r"[{(]{5}\p{L}{3}", 8),
    ("^(a+)+$", 6),
])
def test_pattern_cost_multiplies_out_counted_repeats(pattern: str, cost: int) -> None:
    assert pattern_cost(pattern, 100_000) == cost


@pytest.mark.parametrize("pattern", ["((a{100}){100}){100}", "a{99999999999}", "a{60000,}",
                                     "x" * 30_000, "(?:a{20}){20}" * 60])
def test_costly_patterns_stop_at_the_limit(pattern: str) -> None:
    assert pattern_cost(pattern, 20_000) == 20_001


@pytest.mark.parametrize("pattern", ["(?V1)[[]((]", "(?x)a # (", "(?ix:a)", "(a", "a)"])
def test_patterns_the_scan_could_misjudge_are_refused(pattern: str) -> None:
    with pytest.raises(PatternRefused):
        pattern_cost(pattern, 20_000)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab(){}[]|\\?*+,0123456789:^-xV", max_size=40))
def test_pattern_cost_is_bounded_and_total(pattern: str) -> None:
    try:
        cost = pattern_cost(pattern, 1_000)
    except PatternRefused:
        return
    assert 0 <= cost <= 1_001


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"a": {"type": "string", "pattern": "((a{100}){100}){100}"}}},
    {"type": "object", "patternProperties": {"^((x{50}){50}){50}$": {}}},
    {"type": "object", "$defs": {"d": {"pattern": "(((a{12}){12}){12}){12}"}}},
    {"type": "object", "dependencies": {"a": {"pattern": "((a{100}){100}){100}"}}},
    {"type": "object", "properties": {f"p{i}": {"pattern": "(?:a{20}){20}"} for i in range(60)}},
])
def test_costly_patterns_are_refused_at_the_gate_without_compiling(schema: dict[str, Any]) -> None:
    rss_before = _rss_bytes()
    started = time.perf_counter()
    violations = schema_violations(schema)
    assert time.perf_counter() - started < 1
    assert any("max_pattern_cost=20000" in line for line in violations), violations
    assert _rss_bytes() - rss_before < 50 * 1024 * 1024


def test_format_regex_values_are_compiled_within_the_budget() -> None:
    schema = {"type": "object", "properties": {"re": {"type": "string", "format": "regex"}}}
    started = time.perf_counter()
    [violation] = value_violations(schema, {"re": "(((x{90}){90}){90}){90}"})
    assert time.perf_counter() - started < 1
    assert violation.startswith("value.re: ") and "max_pattern_cost=20000" in violation
    assert value_violations(schema, {"re": "^[a-z]{2,8}$"}) == []


def test_rss_does_not_grow_after_nested_repeat_patterns() -> None:
    gc.collect()
    before = _rss_bytes()
    for i in range(5):
        bomb = f"(?:(?:(?:{'b' * (i + 1)}{{100}}){{100}}){{100}})"
        schema_violations({"type": "object", "properties": {"a": {"pattern": bomb}},
                           "patternProperties": {bomb: {}}})
        value_violations({"type": "object", "properties": {"a": {"format": "regex"}}}, {"a": bomb})
    gc.collect()
    assert _rss_bytes() - before < 100 * 1024 * 1024


# -- the step budget of value validation ----------------------------------------------------------


@pytest.mark.parametrize("keyword", ["anyOf", "oneOf"])
def test_fanout_validation_stops_at_the_step_budget(keyword: str) -> None:
    schema = _fanout(24, keyword)
    limits = SchemaLimits(max_validation_steps=2_000)
    started = time.perf_counter()
    [violation] = value_violations(schema, {"a": "abc"}, limits=limits)
    assert time.perf_counter() - started < 1
    assert violation.startswith("value: validation stopped after 2000 steps")
    assert "max_validation_steps=2000" in violation
    started = time.perf_counter()
    assert value_violations(schema, {"a": "abc"})[0].endswith(
        "(max_validation_steps=20000); the schema's branches and references fan out too much to "
        "check this value")
    assert time.perf_counter() - started < 5


def test_allof_fanout_is_bounded_for_valid_and_invalid_values() -> None:
    schema = _fanout(24, "allOf")
    started = time.perf_counter()
    [violation] = value_violations(schema, {"a": "abcdef"})  # valid, but 2^24 paths to prove it
    assert "max_validation_steps=20000" in violation
    assert 0 < len(value_violations(schema, {"a": "abc"})) <= 10  # stops at the 10th error
    assert time.perf_counter() - started < 5


def test_a_valid_value_down_the_first_branch_is_cheap() -> None:
    assert value_violations(_fanout(24), {"a": "abcdef"}, limits=SchemaLimits(max_validation_steps=500)) == []


def test_annotation_walks_count_against_the_budget() -> None:
    defs: dict[str, Any] = {}
    for i in range(22):
        nxt = f"#/$defs/d{i + 1}"
        defs[f"d{i}"] = {"$ref": nxt, "$dynamicRef": nxt}
    defs["d22"] = {"properties": {"a": {}}}
    schema = {"type": "object", "$ref": "#/$defs/d0", "$defs": defs, "unevaluatedProperties": False}
    started = time.perf_counter()
    [violation] = value_violations(schema, {"a": 1, "b": 2})
    assert time.perf_counter() - started < 5
    assert "max_validation_steps=20000" in violation


@pytest.mark.parametrize(("value", "expected"), [
    ({"p": 1, "x1": 2, "t": 3, "e": 4}, []),
    ({"p": 1, "zz": 2}, ["value: unevaluated properties are not allowed ('zz' unexpected)"]),
])
def test_unevaluated_properties_collects_every_annotation(value: dict[str, Any],
                                                          expected: list[str]) -> None:
    schema = {"type": "object", "properties": {"p": {}}, "patternProperties": {"^x[0-9]$": {}},
              "allOf": [{"properties": {"t": {}}}],
              "if": {"required": ["p"]}, "then": {"properties": {"e": {}}},
              "unevaluatedProperties": False}
    assert value_violations(schema, value) == expected


@pytest.mark.parametrize("schema", [
    {"type": "object", "patternProperties": {"^(a+)+$": {}}, "unevaluatedProperties": False},
    {"type": "object", "patternProperties": {"^(a+)+$": {}}, "additionalProperties": False},
    {"type": "object", "properties": {"k": {"$schema": "https://json-schema.org/draft/2020-12/schema",
                                             "propertyNames": {"pattern": "^(a|a)+$"}}}},
])
def test_catastrophic_patterns_are_matched_within_the_time_budget(schema: dict[str, Any]) -> None:
    key = "a" * 40 + "!"
    started = time.perf_counter()
    assert value_violations(schema, {key: 1, "k": {key: 1}}) != []
    assert time.perf_counter() - started < 1


def test_only_matching_spends_the_matching_budget() -> None:
    """Time a validation spends elsewhere (a large value, a thread a busy machine holds back)
    never makes a later match "too slow": a valid value is not judged by the machine's load.
    The matches themselves still share one budget."""
    with validation_budget(seconds=PATTERN_BUDGET_S):
        time.sleep(2 * PATTERN_BUDGET_S)
        assert bounded_search(r"^INV-\d{4}$", "INV-0042") is True
        assert bounded_search(r"^INV-\d{4}$", "INV-42") is False
        assert bounded_search("^(a|a)+$", "a" * 40 + "!") is None  # spends what is left
        assert bounded_search(r"^INV-\d{4}$", "INV-0042") is None


# -- on the engines: off the loop, in call order ---------------------------------------------------


class Heartbeat:
    """The longest gap between the event loop's turns while it runs."""

    def __init__(self) -> None:
        self.max_gap = 0.0

    async def run(self) -> None:
        last = time.perf_counter()
        while True:
            await anyio.sleep(0.002)
            now = time.perf_counter()
            self.max_gap = max(self.max_gap, now - last)
            last = now


def _answer(request: SubagentRequest) -> SubagentResult | str:
    if request.prompt.startswith("value:"):
        import json
        return SubagentResult(structured=json.loads(request.prompt[len("value:"):]))
    return "ok:" + request.prompt


async def _run(engine: str, script: str, *, config: EngineConfig | None = None,
               cancel_after: float | None = None) -> tuple[Any, list[WorkflowEvent], float]:
    factory = ENGINES[engine]
    if factory is None:
        pytest.skip("the subprocess engine cannot run here")
    events: list[WorkflowEvent] = []
    heartbeat = Heartbeat()
    async with factory(config or EngineConfig(), FunctionProvider(_answer)) as eng:
        eng.events.subscribe(events.append)
        async with anyio.create_task_group() as tg:
            tg.start_soon(heartbeat.run)
            await anyio.sleep(0.01)
            run = eng.start(WorkflowStartRequest(meta=META, script=script))
            if cancel_after is not None:
                await anyio.sleep(cancel_after)
                run.cancel("stop")
            with anyio.fail_after(30):
                result = await run.result()
            await run.dispose()
            tg.cancel_scope.cancel()
    check_run_events(events, run, result)
    return result, events, heartbeat.max_gap


@pytest.mark.anyio
@pytest.mark.parametrize("engine", ["quickjs", "subprocess"])
async def test_gate_and_validation_never_hold_the_loop(engine: str) -> None:
    salt = _fresh()
    worst = {"type": "object", "properties": {f"{salt}{i}": {} for i in range(495)}}
    import json
    script = (f"const worst = {json.dumps(worst)};\nconst fan = {json.dumps(_fanout(24))};\n"
              "const a = await agent('value:{}', {schema: worst});\n"
              "const b = await agent('value:' + JSON.stringify({a: 'abc'}), {schema: fan});\n"
              "return [a, b];")
    result, _, gap = await _run(engine, script)
    assert result.value == [{}, None], result
    assert gap < 0.1, f"the event loop was held for {gap:.3f} s"


@pytest.mark.anyio
@pytest.mark.parametrize("engine", ["quickjs", "subprocess"])
async def test_calls_are_admitted_in_call_order_around_the_gate(engine: str) -> None:
    import json
    slow = _wide(450, _fresh())
    quick = {"type": "object", "properties": {_fresh(): {"type": "string"}}}
    script = (f"const slow = {json.dumps(slow)}; const quick = {json.dumps(quick)};\n"
              "return await parallel([() => agent('value:{}', {label: 'a', schema: slow}),\n"
              "  () => agent('b', {label: 'b'}), () => agent('value:{}', {label: 'c', schema: quick}),\n"
              "  () => agent('d', {label: 'd'})]);")
    result, events, _ = await _run(engine, script)
    assert result.value == [{}, "ok:b", {}, "ok:d"], result
    started = [(e.seq, e.label) for e in events if isinstance(e, AgentStarted)]
    assert started == [(1, "a"), (2, "b"), (3, "c"), (4, "d")]


@pytest.mark.anyio
@pytest.mark.parametrize("engine", ["quickjs", "subprocess"])
async def test_a_refused_schema_after_the_gate_is_fatal(engine: str) -> None:
    import json
    slow = _wide(450, _fresh())
    script = (f"const slow = {json.dumps(slow)};\n"
              "await parallel([() => agent('x', {label: 'a', schema: slow}),\n"
              "  () => agent('y', {schema: {type: 'object', properties: {z: {pattern: '((a{99}){99}){99}'}}}}),\n"
              "  () => agent('z', {label: 'c'})]);\nreturn 'unreachable';")
    result, events, _ = await _run(engine, script)
    assert (result.stop_reason == "error" and result.error_code == "UNSUPPORTED_SCHEMA"
            and result.error.startswith("UNSUPPORTED_SCHEMA:")), result
    assert "max_pattern_cost=20000" in result.error
    assert [e.label for e in events if isinstance(e, AgentStarted)][:1] == ["a"]


@pytest.mark.anyio
@pytest.mark.parametrize("engine", ["quickjs", "subprocess"])
async def test_cancel_while_the_gate_checks(engine: str) -> None:
    import json
    worst = {"type": "object", "properties": {f"{_fresh()}{i}": {} for i in range(495)}}
    script = f"await agent('x', {{schema: {json.dumps(worst)}}});\nreturn 'done';"
    result, events, gap = await _run(engine, script, cancel_after=0.03)
    assert result.stop_reason == "cancelled", result
    assert not [e for e in events if isinstance(e, AgentStarted)]
    assert gap < 0.1


def test_default_limits_match_the_engine_config() -> None:
    assert SchemaLimits.of(EngineConfig()) == DEFAULT_LIMITS
    config = EngineConfig(max_schema_nodes=77, max_schema_chars=5_000, max_pattern_cost=300,
                          max_validation_steps=999)
    assert SchemaLimits.of(config) == SchemaLimits(5_000, 77, 300, 999)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["a", "b", "(", ")", "(?:", "|", "{3}", "{12}", "{99}", "{2,}", "{0,40}",
                                 "[a-z]", "\\d", "*", "+", "?", "{", "}", "[(]"]), max_size=24))
def test_patterns_within_the_cost_limit_compile_small(parts: list[str]) -> None:
    """The estimate bounds what the ``regex`` package really builds: any pattern the analysis
    lets through at a small limit compiles quickly and into little memory."""
    import regex

    pattern = "".join(parts)
    try:
        if pattern_cost(pattern, 2_000) > 2_000:
            return
    except PatternRefused:
        return
    started = time.perf_counter()
    try:
        compiled = regex.compile(pattern, cache_pattern=False)
    except regex.error:
        return
    assert time.perf_counter() - started < 0.05, pattern
    del compiled

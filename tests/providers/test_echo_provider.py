"""EchoProvider and minimal_instance (``dsh_workflow._providers``)."""

from __future__ import annotations

import json
import math
import time
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from dsh_workflow._providers import EchoProvider, minimal_instance
from dsh_workflow._schema import schema_violations, value_violations
from dsh_workflow._schema_instance import schema_instance
from dsh_workflow._subagent import SubagentProvider, SubagentRequest, SubagentResult, Usage


def _request(prompt: str = "say hello world", schema: dict[str, Any] | None = None) -> SubagentRequest:
    return SubagentRequest(prompt=prompt, label="child", schema=schema, run_id="run-1", seq=1)


def _satisfied(schema: dict[str, Any]) -> Any:
    """The minimal instance of ``schema``, checked to satisfy it (a JSON value)."""
    value = minimal_instance(schema)
    assert value_violations(schema, value) == [], value
    return value


# -- EchoProvider -----------------------------------------------------------------------------


def test_echo_provider_is_a_subagent_provider() -> None:
    assert isinstance(EchoProvider(), SubagentProvider)


@pytest.mark.anyio
async def test_text_answer_echoes_the_prompt() -> None:
    result = await EchoProvider().run(_request("say hello world"))
    assert result == SubagentResult(
        stop_reason="completed",
        text="echo: say hello world",
        structured=None,
        usage=Usage(input_tokens=3, output_tokens=4),
    )


@pytest.mark.anyio
async def test_schema_answer_is_a_valid_minimal_instance() -> None:
    schema = {
        "type": "object",
        "properties": {
            "summary": {"type": "string", "minLength": 5},
            "score": {"type": "integer", "minimum": 1, "maximum": 10},
            "verdict": {"enum": ["accept", "reject"]},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["summary", "score", "verdict", "tags"],
    }
    provider = EchoProvider()
    result = await provider.run(_request("rate it", schema))
    assert result.stop_reason == "completed"
    assert result.structured == {"summary": "xxxxx", "score": 1, "verdict": "accept", "tags": []}
    assert json.loads(result.text or "") == result.structured
    assert result.usage == Usage(input_tokens=2, output_tokens=1)
    assert value_violations(schema, result.structured) == []
    assert await provider.run(_request("rate it", schema)) == result  # deterministic


@pytest.mark.anyio
async def test_latency_is_slept() -> None:
    started = anyio.current_time()
    result = await EchoProvider(latency_s=0.05).run(_request())
    assert anyio.current_time() - started >= 0.05
    assert result.text == "echo: say hello world"


@pytest.mark.anyio
async def test_latency_is_cancellable() -> None:
    started = anyio.current_time()
    with anyio.move_on_after(0.05) as scope:
        await EchoProvider(latency_s=30).run(_request())
        pytest.fail("run() returned despite the cancellation")
    assert scope.cancelled_caught
    assert anyio.current_time() - started < 5


@pytest.mark.anyio
async def test_zero_latency_still_honours_cancellation() -> None:
    with anyio.CancelScope() as scope:
        scope.cancel()
        await EchoProvider().run(_request())
        pytest.fail("run() returned inside a cancelled scope")
    assert scope.cancelled_caught


@pytest.mark.parametrize("latency", [-1, math.nan, math.inf, "1", True])
def test_invalid_latency_is_refused(latency: object) -> None:
    with pytest.raises(ValueError, match="latency_s"):
        EchoProvider(latency_s=latency)  # type: ignore[arg-type]  # deliberately wrong


# -- minimal_instance: examples -----------------------------------------------------------------


def test_types_and_bounds() -> None:
    schema = {
        "type": "object",
        "properties": {
            "s": {"type": "string", "minLength": 3},
            "n": {"type": ["null", "integer"], "minimum": 5},
            "f": {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
            "m": {"type": "integer", "multipleOf": 7, "minimum": 10},
            "neg": {"type": "integer", "exclusiveMaximum": -2},
            "b": {"type": "boolean"},
            "z": {"type": "null"},
            "a": {"type": "array", "minItems": 2, "items": {"type": "integer", "minimum": 1}},
            "o": {"type": "object", "minProperties": 2, "additionalProperties": {"type": "string"}},
            "optional": {"type": "string"},
        },
        "required": ["s", "n", "f", "m", "neg", "b", "z", "a", "o"],
    }
    assert _satisfied(schema) == {
        "s": "xxx",
        "n": 5,
        "f": 0.5,
        "m": 14,
        "neg": -3,
        "b": False,
        "z": None,
        "a": [1, 1],
        "o": {"x1": "", "x2": ""},
    }


def test_enum_const_and_formats() -> None:
    schema = {
        "type": "object",
        "properties": {
            "e": {"type": "string", "enum": [1, "two", "three"]},
            "c": {"const": {"k": [1, 2]}},
            "date": {"type": "string", "format": "date"},
            "when": {"type": "string", "format": "date-time"},
            "mail": {"type": "string", "format": "email", "minLength": 20},
            "link": {"type": "string", "format": "uri"},
            "id": {"type": "string", "format": "uuid"},
        },
        "required": ["e", "c", "date", "when", "mail", "link", "id"],
    }
    value = _satisfied(schema)
    assert value["e"] == "two"  # the first member that fits the other keywords
    assert value["c"] == {"k": [1, 2]}
    assert value["mail"].endswith("@example.com") and len(value["mail"]) == 20
    assert value["date"] == "1970-01-01"


def test_branches_merges_and_refs() -> None:
    schema = {
        "type": "object",
        "$defs": {"pos": {"type": "integer", "minimum": 1}},
        "properties": {
            "any": {"anyOf": [{"type": "string", "minLength": 2, "maxLength": 1}, {"$ref": "#/$defs/pos"}]},
            "one": {"oneOf": [{"type": "number"}, {"type": "integer"}]},
            "all": {"allOf": [{"type": "integer"}, {"minimum": 3}, {"maximum": 9}]},
            "ref": {"$ref": "#/$defs/pos", "maximum": 4},
            "cond": {
                "type": "object",
                "properties": {"kind": {"enum": ["a", "b"]}},
                "required": ["kind"],
                "if": {"properties": {"kind": {"const": "a"}}},
                "then": {"required": ["extra"]},
            },
        },
        "required": ["any", "one", "all", "ref", "cond"],
    }
    value = _satisfied(schema)
    assert value["any"] == 1
    assert value["one"] == 0.5  # exactly one oneOf branch matches
    assert value["all"] == 3
    assert value["ref"] == 1
    assert value["cond"] == {"kind": "a", "extra": None}


def test_unique_items_are_made_distinct() -> None:
    schema = {
        "type": "object",
        "properties": {
            "s": {"type": "array", "items": {"type": "string"}, "minItems": 3, "uniqueItems": True},
            "e": {"type": "array", "items": {"enum": ["a", "b", "c"]}, "minItems": 2, "uniqueItems": True},
            "c": {"type": "array", "contains": {"type": "integer", "minimum": 5}, "minContains": 2},
        },
        "required": ["s", "e", "c"],
    }
    assert _satisfied(schema) == {"s": ["", "x", "xx"], "e": ["a", "b"], "c": [5, 5]}


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"next": {"$ref": "#"}}, "required": ["next"]},
        {
            "type": "object",
            "$defs": {"node": {"type": ["object", "null"],
                               "properties": {"next": {"$ref": "#/$defs/node"}}, "required": ["next"]}},
            "properties": {"head": {"$ref": "#/$defs/node"}},
            "required": ["head"],
        },
        {
            "type": "object",
            "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}},
            "properties": {"x": {"$ref": "#/$defs/a"}},
            "required": ["x"],
        },
        {
            "type": "object",
            "$defs": {"t": {"type": "object",
                            "properties": {"l": {"$ref": "#/$defs/t"}, "r": {"$ref": "#/$defs/t"}},
                            "required": ["l", "r"]}},
            "properties": {"root": {"$ref": "#/$defs/t"}},
            "required": ["root"],
        },
    ],
)
def test_recursive_refs_terminate(schema: dict[str, Any]) -> None:
    value = minimal_instance(schema)  # terminates; unsatisfiable recursion is best effort
    json.dumps(value)


def test_recursive_ref_with_a_way_out_is_minimal() -> None:
    schema: dict[str, Any] = {
        "type": "object",
        "$defs": {"node": {"type": ["object", "null"],
                           "properties": {"next": {"$ref": "#/$defs/node"}}, "required": ["next"]}},
        "properties": {"head": {"$ref": "#/$defs/node"}, "list": {"$ref": "#/$defs/list"}},
        "required": ["head", "list"],
    }
    schema["$defs"]["list"] = {
        "type": "object",
        "properties": {"next": {"anyOf": [{"$ref": "#/$defs/list"}, {"type": "null"}]}},
        "required": ["next"],
    }
    assert _satisfied(schema) == {"head": {"next": None}, "list": {"next": None}}


def test_unsatisfiable_keywords_are_best_effort() -> None:
    schema = {"type": "object", "properties": {"code": {"type": "string", "not": {"const": ""}}},
              "required": ["code"]}
    value = minimal_instance(schema)
    assert value == {"code": ""}
    assert value_violations(schema, value) == ["value.code: '' should not be valid under "
                                               "{'const': ''}"]


@pytest.mark.parametrize("pattern", [r"^INV-\d{4}$", "^[0-9]{3}$", r"^[A-Z]{2}-\d+$",
                                     "^(red|green|blue)$", r"^\w+@\w+\.(com|org)$", "z"])
def test_a_pattern_is_honoured_with_a_generated_string(pattern: str) -> None:
    schema = {"type": "object", "required": ["s"],
              "properties": {"s": {"type": "string", "pattern": pattern}}}
    value = minimal_instance(schema, "a prompt")
    assert isinstance(value, dict) and value["s"]
    assert value_violations(schema, value) == []
    assert minimal_instance(schema, "a prompt") == value  # the same seed, the same value


def test_the_seed_varies_the_generated_strings() -> None:
    schema = {"type": "object", "required": ["n"],
              "properties": {"n": {"type": "string", "pattern": r"^INV-\d{4}$"}}}
    values = {json.dumps(minimal_instance(schema, f"invoice {i}")) for i in range(20)}
    assert len(values) > 10


def test_a_pattern_with_lengths_and_a_format_with_lengths() -> None:
    schema = {"type": "object", "required": ["a", "b", "c"], "properties": {
        "a": {"type": "string", "pattern": "^z", "minLength": 5, "maxLength": 8},
        "b": {"type": "string", "maxLength": 3, "minLength": 2},
        "c": {"type": "string", "pattern": "^[a-c]+$", "minLength": 3, "maxLength": 4}}}
    value = minimal_instance(schema, "s")
    assert value_violations(schema, value) == [], value


@pytest.mark.parametrize("fmt", ["date", "date-time", "time", "email", "uri", "uuid", "ipv4",
                                 "ipv6", "hostname", "duration", "uri-reference", "json-pointer",
                                 "regex", "idn-email"])
def test_formats_are_honoured(fmt: str) -> None:
    schema = {"type": "object", "required": ["v"],
              "properties": {"v": {"type": "string", "format": fmt}}}
    value = minimal_instance(schema)
    assert value_violations(schema, value) == [], value


@pytest.mark.parametrize("pattern", ["((a+)+)+b", r"\p{L}+", "(a)\\1{5000}"])
def test_a_pattern_it_cannot_generate_from_is_left_unsatisfied_quickly(pattern: str) -> None:
    schema = {"type": "object", "required": ["s"],
              "properties": {"s": {"type": "string", "pattern": pattern}}}
    started = time.perf_counter()
    value, problems = schema_instance(schema, "x")
    assert time.perf_counter() - started < 2
    assert value == {"s": ""} and problems and problems[0].startswith("/s: '' does not match")


@pytest.mark.anyio
async def test_the_echo_provider_fails_a_child_it_cannot_answer_validly() -> None:
    schema = {"type": "object", "required": ["s"],
              "properties": {"s": {"type": "string", "not": {"const": ""}}}}
    result = await EchoProvider().run(_request("x", schema))
    assert result.stop_reason == "error"
    assert result.structured is None and result.text == '{"s":""}'
    assert result.error == ("the echo provider cannot build a value that satisfies the schema: "
                            "/s: '' should not be valid under {'const': ''}")
    invoice = {"type": "object", "required": ["number"],
               "properties": {"number": {"type": "string", "pattern": r"^INV-\d{4}$"}}}
    answered = await EchoProvider().run(_request("invoice 3", invoice))
    assert answered.stop_reason == "completed"
    assert value_violations(invoice, answered.structured) == []


def test_odd_inputs_do_not_raise() -> None:
    assert minimal_instance("not a schema") is None
    assert minimal_instance({"type": "object", "x": {1, 2}}) == {}
    remote = {"type": "object", "properties": {"a": {"$ref": "http://x/y"}}, "required": ["a"]}
    assert minimal_instance(remote) == {"a": None}
    deep: dict[str, Any] = {"type": "object"}
    for _ in range(5_000):
        deep = {"type": "object", "properties": {"a": deep}, "required": ["a"]}
    json.dumps(minimal_instance(deep))


# -- minimal_instance: property -------------------------------------------------------------------

_names = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), min_size=1, max_size=6)
_scalars = (
    st.none() | st.booleans() | st.integers(-10**6, 10**6)
    | st.floats(allow_nan=False, allow_infinity=False, width=32) | st.text(max_size=5)
)  # fmt: skip


def _optional(key: str, values: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(st.just({}), values.map(lambda v: {key: v}))


_leaf_schemas = st.one_of(
    st.builds(lambda extra: {"type": "string", **extra}, _optional("minLength", st.integers(0, 12))),
    st.builds(lambda extra: {"type": "integer", **extra}, _optional("minimum", st.integers(-1000, 1000))),
    st.builds(
        lambda extra: {"type": "number", **extra},
        _optional("minimum", st.floats(-1e6, 1e6)) | _optional("exclusiveMinimum", st.integers(-1000, 1000)),
    ),
    st.just({"type": "boolean"}),
    st.builds(lambda members: {"enum": members}, st.lists(_scalars, min_size=1, max_size=4)),
    st.builds(lambda value: {"const": value}, _scalars | st.lists(_scalars, max_size=3)),
    st.builds(
        lambda types, extra: {"type": types, **extra},
        st.lists(st.sampled_from(["string", "integer", "number", "boolean", "null"]),
                 min_size=1, max_size=3, unique=True),
        _optional("minimum", st.integers(-50, 50)),
    ),
)


def _object_schemas(children: st.SearchStrategy) -> st.SearchStrategy:
    def with_required(properties: dict[str, Any]) -> st.SearchStrategy:
        required = st.lists(st.sampled_from(sorted(properties)), unique=True) if properties else st.just([])
        return required.map(lambda names: {"type": "object", "properties": properties, "required": names})

    return st.dictionaries(_names, children, max_size=4).flatmap(with_required)


_schemas = st.recursive(
    _leaf_schemas,
    lambda children: st.one_of(
        _object_schemas(children),
        st.builds(
            lambda items, extra: {"type": "array", "items": items, **extra},
            children,
            _optional("minItems", st.integers(0, 3)),
        ),
        st.lists(children, min_size=1, max_size=3).map(lambda branches: {"anyOf": branches}),
    ),
    max_leaves=12,
)
_root_schemas = _object_schemas(_schemas)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_root_schemas)
def test_minimal_instance_satisfies_generated_schemas(schema: dict[str, Any]) -> None:
    assume(schema_violations(schema) == [])
    value = minimal_instance(schema)
    assert value_violations(schema, value) == [], value
    json.dumps(value, allow_nan=False)


_json_values = st.recursive(
    _scalars | st.sampled_from(["object", "array", "#", "#/$defs/a", "("]),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(
        st.sampled_from(["type", "properties", "required", "items", "$ref", "$defs", "anyOf", "oneOf",
                         "allOf", "enum", "const", "minimum", "minItems", "minLength", "if", "then"])
        | _names,
        children,
        max_size=5,
    ),
    max_leaves=30,
)  # fmt: skip


@settings(max_examples=300, deadline=None)
@given(_json_values)
def test_minimal_instance_never_raises(schema: object) -> None:
    json.dumps(minimal_instance(schema), allow_nan=False)


# -- hostile schemas: bounded generation, off the event loop ----------------------------------


def test_the_generator_lives_in_its_own_module() -> None:
    from dsh_workflow import _schema_instance

    assert minimal_instance is _schema_instance.minimal_instance


@pytest.mark.parametrize("pattern", ["^(a+)+$", "^(a|a)+$", "((a{100}){100}){100}", "("])
def test_pattern_properties_are_matched_with_bounded_regex(pattern: str) -> None:
    key = "a" * 30 + "!"
    schema = {"type": "object", "required": [key], "patternProperties": {pattern: {"type": "integer"}},
              "additionalProperties": {"type": "string"}}
    started = time.perf_counter()
    value = minimal_instance(schema)
    assert time.perf_counter() - started < 0.5
    assert isinstance(value, dict) and list(value) == [key]


def test_pattern_properties_still_pick_the_matching_subschema() -> None:
    schema = {"type": "object", "required": ["x1"], "patternProperties": {"^x[0-9]$": {"type": "integer"}},
              "additionalProperties": False}
    assert _satisfied(schema) == {"x1": 0}


def _fanout(n: int) -> dict[str, Any]:
    defs: dict[str, dict[str, Any]] = {f"d{i}": {"anyOf": [{"$ref": f"#/$defs/d{i + 1}"}] * 2} for i in range(n)}
    defs[f"d{n}"] = {"type": "string", "minLength": 5, "pattern": "^z"}
    return {"type": "object", "$defs": defs, "properties": {"a": {"$ref": "#/$defs/d0"}}, "required": ["a"]}


def test_fanout_generation_is_bounded() -> None:
    started = time.perf_counter()
    value = minimal_instance(_fanout(24))
    assert time.perf_counter() - started < 5
    assert isinstance(value, dict)


@pytest.mark.anyio
async def test_generation_never_holds_the_event_loop() -> None:
    gaps: list[float] = []

    async def heartbeat() -> None:
        last = time.perf_counter()
        while True:
            await anyio.sleep(0.002)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    async with anyio.create_task_group() as tg:
        tg.start_soon(heartbeat)
        await anyio.sleep(0.01)
        result = await EchoProvider().run(_request("x", _fanout(24)))
        key = "a" * 30 + "!"
        await EchoProvider().run(_request("y", {"type": "object", "required": [key],
                                                "patternProperties": {"^(a+)+$": {}}}))
        tg.cancel_scope.cancel()
    assert result.stop_reason == "completed"
    assert max(gaps) < 0.1, f"the event loop was held for {max(gaps):.3f} s"

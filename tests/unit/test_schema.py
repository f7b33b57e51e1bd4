"""The schema gate (``dsh_workflow._schema``): docs/scripts.md rules on top of jsonschema 2020-12."""

from __future__ import annotations

import copy
import math
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsh_workflow._errors import WorkflowError, WorkflowErrorCode
from dsh_workflow._schema import (
    MAX_SCHEMA_DEPTH,
    SchemaLimits,
    check_agent_schema,
    compiled_validator,
    format_path,
    schema_violations,
    value_violations,
)

MODEL_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "person": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "minLength": 1, "pattern": "^[A-Z]"},
                "email": {"type": "string", "format": "email"},
                "age": {"type": ["integer", "null"], "minimum": 0, "maximum": 150},
            },
            "required": ["name"],
            "additionalProperties": False,
        }
    },
    "properties": {
        "people": {"type": "array", "items": {"$ref": "#/$defs/person"}, "minItems": 1},
        "status": {"enum": ["ok", "partial", "failed"]},
        "version": {"const": 2},
        "score": {"anyOf": [{"type": "number", "exclusiveMinimum": 0}, {"type": "null"}]},
        "kind": {"oneOf": [{"type": "string"}, {"type": "integer"}]},
        "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
        "self": {"$ref": "#"},
    },
    "required": ["people", "status"],
}


# -- accepted schemas --------------------------------------------------------------------


def test_keywords_models_write_are_accepted() -> None:
    assert schema_violations(MODEL_SCHEMA) == []
    check_agent_schema(MODEL_SCHEMA)  # does not raise


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object"},
        {"type": "object", "$schema": "https://json-schema.org/draft/2020-12/schema#"},
        {"type": "object", "properties": {"$ref": {"type": "string"}}},  # a property, not a keyword
        {"type": "object", "properties": {"a": {"const": {"$ref": "http://example.com/x"}}}},  # data
        {"type": "object", "$defs": {"a": {"$anchor": "here", "type": "string"}},
         "properties": {"x": {"$ref": "#here"}}},
        {"type": "object", "properties": {"a%b": {"type": "string"}, "c": {"$ref": "#/properties/a%25b"}}},
        {
            # an embedded resource resolves "#" refs against itself, as jsonschema does
            "type": "object",
            "$defs": {
                "a": {
                    "$id": "https://example.com/a.json",
                    "$defs": {"b": {"type": "string"}},
                    "properties": {"x": {"$ref": "#/$defs/b"}},
                }
            },
        },
    ],
)
def test_self_contained_schemas_are_accepted(schema: dict[str, Any]) -> None:
    assert schema_violations(schema) == []


# -- one example per violation kind -------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ("object", 'schema: must be a JSON object with "type": "object" (got str)'),
        ([{"type": "object"}], 'schema: must be a JSON object with "type": "object" (got an array)'),
        (None, 'schema: must be a JSON object with "type": "object" (got NoneType)'),
    ],
)
def test_schema_must_be_an_object(schema: object, expected: str) -> None:
    assert schema_violations(schema) == [expected]


@pytest.mark.parametrize(
    ("schema", "got"),
    [
        ({"type": "array", "items": {"type": "string"}}, 'got "array"'),
        ({"properties": {"a": {"type": "string"}}}, "missing"),
        ({"type": ["object", "null"]}, 'got ["object", "null"]'),
    ],
)
def test_schema_must_be_object_rooted(schema: dict[str, Any], got: str) -> None:
    assert schema_violations(schema) == [
        f'schema.type: must be "object" (structured output is object-rooted); {got}'
    ]


def test_bad_keyword_value_names_the_path_and_the_allowed_values() -> None:
    [violation] = schema_violations({"type": "object", "properties": {"a": {"type": "strnig"}}})
    assert violation.startswith("schema.properties.a.type: 'strnig' is not valid")
    assert "'string'" in violation and "'object'" in violation


def test_all_metaschema_errors_are_collected() -> None:
    schema = {
        "type": "object",
        "minProperties": -1,
        "required": "name",
        "properties": {"a": {"pattern": "("}, "b": {"anyOf": []}},
    }
    violations = schema_violations(schema)
    assert "schema.minProperties: -1 is less than the minimum of 0" in violations
    assert "schema.required: 'name' is not of type 'array'" in violations
    assert "schema.properties.a.pattern: '(' is not a 'regex': unbalanced parenthesis" in violations
    assert any(v.startswith("schema.properties.b.anyOf: ") for v in violations)
    assert len(violations) == len(set(violations)) == 4


@pytest.mark.parametrize("ref", ["http://example.com/schema.json", "other.json#/x", "urn:x"])
def test_remote_ref_is_a_violation(ref: str) -> None:
    [violation] = schema_violations({"type": "object", "properties": {"a": {"$ref": ref}}})
    assert violation.startswith(f'schema.properties.a.$ref: "{ref}" points outside the schema')
    assert "#/$defs/<name>" in violation


@pytest.mark.parametrize("ref", ["#/$defs/missing", "#nowhere", "#/properties/a/items"])
def test_unresolvable_local_ref_is_a_violation(ref: str) -> None:
    schema = {"type": "object", "$defs": {"x": {}}, "properties": {"a": {"anyOf": [{}, {"$ref": ref}]}}}
    assert schema_violations(schema) == [
        f'schema.properties.a.anyOf[1].$ref: "{ref}" does not resolve inside the schema'
    ]


def test_dynamic_ref_is_checked_too() -> None:
    schema = {"type": "object", "properties": {"a": {"$dynamicRef": "https://example.com/meta"}}}
    [violation] = schema_violations(schema)
    assert violation.startswith("schema.properties.a.$dynamicRef: ")


def test_foreign_dialect_is_a_violation() -> None:
    [violation] = schema_violations({"type": "object", "$schema": "http://json-schema.org/draft-07/schema#"})
    assert violation.startswith('schema.$schema: must be "https://json-schema.org/draft/2020-12/schema"')


def test_every_violation_is_listed_at_once() -> None:
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "array",
        "properties": {
            "a": {"type": "strnig"},
            "b": {"$ref": "http://example.com/b.json"},
            "c": {"$ref": "#/$defs/missing"},
        },
    }
    violations = schema_violations(schema)
    assert [v.split(":")[0] for v in violations] == [
        "schema.properties.a.type",
        "schema.type",
        "schema.$schema",
        "schema.properties.b.$ref",
        "schema.properties.c.$ref",
    ]
    with pytest.raises(WorkflowError) as caught:
        check_agent_schema(schema)
    error = caught.value
    assert error.code is WorkflowErrorCode.UNSUPPORTED_SCHEMA
    assert error.fatal is True
    assert str(error) == "agent() schema is not a supported JSON Schema — " + "; ".join(violations)


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({"type": "object", "x": {1, 2}}, "schema.x: a set is not JSON data"),
        ({"type": "object", "x": len}, "schema.x: a builtin_function_or_method is not JSON data"),
        ({"type": "object", "x": (1,)}, "schema.x: a tuple is not JSON data"),
        ({"type": "object", "minimum": math.nan}, "schema.minimum: nan is not a JSON number"),
        ({"type": "object", 3: {}}, "schema: key 3 is not a string"),
    ],
)
def test_non_json_input_is_a_violation(schema: dict[Any, Any], expected: str) -> None:
    assert schema_violations(schema) == [expected]


def test_non_json_top_level_inputs_are_violations() -> None:
    for value in ({1, 2}, len, object(), b"{}", 3.5):
        [violation] = schema_violations(value)
        assert violation.startswith("schema: must be a JSON object")


def _nested(depth: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object"}
    for _ in range(depth):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


def test_deep_schema_is_a_violation_not_a_crash() -> None:
    for depth in (MAX_SCHEMA_DEPTH, 5_000):
        violations = schema_violations(_nested(depth))
        assert len(violations) == 1
        assert violations[0].startswith("schema.properties.a.properties.a.properties.a.properties.a…: ")
        assert violations[0].endswith(f": nested deeper than {MAX_SCHEMA_DEPTH} levels")
        with pytest.raises(WorkflowError):
            check_agent_schema(_nested(depth))


def test_moderately_deep_schema_is_accepted() -> None:
    assert schema_violations(_nested(MAX_SCHEMA_DEPTH // 2 - 1)) == []


def test_huge_schema_is_checked_in_reasonable_time() -> None:
    schema = {"type": "object", "properties": {f"p{i}": {"type": "string", "minLength": 1} for i in range(5_000)}}
    roomy = SchemaLimits(max_schema_nodes=50_000, max_schema_chars=1_000_000)
    started = time.monotonic()
    assert schema_violations(schema, roomy) == []
    assert time.monotonic() - started < 30


# -- hypothesis: never raises ---------------------------------------------------------------

KEYWORDS = ["type", "properties", "items", "$ref", "$dynamicRef", "$defs", "anyOf", "oneOf", "allOf",
            "required", "enum", "const", "minimum", "pattern", "format", "$schema", "$id", "$anchor",
            "additionalProperties", "prefixItems", "not", "if", "then", "else", "minItems"]  # fmt: skip

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8)
    | st.sampled_from(["object", "string", "#", "#/$defs/a", "#/properties", "http://x/y", "("])
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.sampled_from(KEYWORDS) | st.text(max_size=4), children, max_size=5),
    max_leaves=30,
)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_schema_violations_never_raises_on_json(value: object) -> None:
    result = schema_violations(value)
    assert isinstance(result, list)
    assert all(isinstance(line, str) and ": " in line for line in result)
    if result:
        with pytest.raises(WorkflowError):
            check_agent_schema(value)
    else:
        check_agent_schema(value)


@settings(max_examples=200, deadline=None)
@given(json_values, json_values)
def test_value_violations_never_raises(schema: object, value: object) -> None:
    result = value_violations(schema, value, limit=3)  # type: ignore[arg-type]  # any JSON value stands for a schema here
    assert isinstance(result, list) and len(result) <= 3


# -- value validation ---------------------------------------------------------------------


def test_valid_value_has_no_violations() -> None:
    value = {
        "people": [{"name": "Ada", "email": "ada@example.com", "age": None}],
        "status": "ok",
        "score": 0.5,
        "kind": 3,
    }
    assert value_violations(MODEL_SCHEMA, value) == []


def test_value_paths_and_messages() -> None:
    schema = {
        "type": "object",
        "properties": {
            "items": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}}}},
            "odd key": {"type": "integer"},
        },
        "required": ["items"],
    }
    assert value_violations(schema, {"items": [{}, {}, {"name": 3}], "odd key": "x"}) == [
        "value.items[2].name: 3 is not of type 'string'",
        "value[\"odd key\"]: 'x' is not of type 'integer'",
    ]
    assert value_violations(schema, {}) == ["value: 'items' is a required property"]


def test_value_violations_respects_limit() -> None:
    schema = {"type": "object", "additionalProperties": {"type": "string"}}
    value = {f"k{i}": i for i in range(50)}
    assert len(value_violations(schema, value)) == 10
    assert len(value_violations(schema, value, limit=3)) == 3
    assert value_violations(schema, value, limit=0) == []


def test_branch_failures_name_the_closest_branch() -> None:
    schema = {"type": "object", "anyOf": [{"required": ["a"]}, {"required": ["b"]}]}
    [violation] = value_violations(schema, {})
    assert violation.startswith("value: {} is not valid under any of the given schemas (")


def test_formats_are_checked() -> None:
    # Formats jsonschema checks without optional packages: email, date, ipv4, ipv6, uuid, regex, ...
    schema = {
        "type": "object",
        "properties": {
            "email": {"type": "string", "format": "email"},
            "day": {"type": "string", "format": "date"},
            "id": {"type": "string", "format": "uuid"},
            "ip": {"type": "string", "format": "ipv4"},
        },
    }
    assert value_violations(schema, {"email": "nope", "day": "2024-13-45", "id": "x", "ip": "1.2.3"}) == [
        "value.day: '2024-13-45' is not a 'date'",  # canonical (key-sorted) schema order
        "value.email: 'nope' is not a 'email'",
        "value.id: 'x' is not a 'uuid'",
        "value.ip: '1.2.3' is not a 'ipv4'",
    ]
    good = {"email": "a@example.com", "day": "2024-02-29",
            "id": "12345678-1234-5678-1234-567812345678", "ip": "10.0.0.1"}
    assert value_violations(schema, good) == []


def test_unknown_format_is_an_annotation() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "string", "format": "colour"}}}
    assert schema_violations(schema) == []
    assert value_violations(schema, {"a": "anything"}) == []


def test_recursive_schema_validates_recursive_value() -> None:
    schema = {
        "type": "object",
        "properties": {"value": {"type": "integer"}, "next": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}},
        "required": ["value", "next"],
    }
    assert value_violations(schema, {"value": 1, "next": {"value": 2, "next": None}}) == []
    assert value_violations(schema, {"value": 1, "next": {"value": "2", "next": None}}) != []


def test_validators_are_cached_by_canonical_text() -> None:
    first = {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}
    same = {"required": ["a"], "properties": {"a": {"type": "string"}}, "type": "object"}
    assert compiled_validator(first) is compiled_validator(same)
    assert compiled_validator(first) is not compiled_validator({"type": "object"})


def test_validation_never_touches_the_network() -> None:
    schema = {"type": "object", "properties": {"a": {"$ref": "https://example.com/never-fetched.json"}}}
    [violation] = value_violations(schema, {"a": 1})
    assert violation.startswith("schema: a reference does not resolve inside the schema")


def test_deep_value_is_a_violation_not_a_crash() -> None:
    value: object = []
    for _ in range(50_000):
        value = [value]
    schema = {"type": "object", "properties": {"a": {"$ref": "#/$defs/nest"}},
              "$defs": {"nest": {"type": "array", "items": {"$ref": "#/$defs/nest"}}}}  # fmt: skip
    assert value_violations(schema, {"a": value}) == ["value: nested too deeply to validate"]


def test_unusable_schema_is_reported_not_raised() -> None:
    assert value_violations({"type": "object", "x": {1}}, {})[0].startswith("schema: cannot be used")
    assert value_violations(_nested(5_000), {})[0].startswith("schema: cannot be used")
    assert value_violations({"type": "object", "properties": {"a": {"pattern": "("}}}, {"a": "x"})[0].startswith(
        "value: cannot be validated"
    )


def test_checks_do_not_mutate_the_schema() -> None:
    schema = copy.deepcopy(MODEL_SCHEMA)
    schema_violations(schema)
    value_violations(schema, {"people": []})
    assert schema == MODEL_SCHEMA


def test_format_path() -> None:
    assert format_path("value", ["items", 2, "name"]) == "value.items[2].name"
    assert format_path("schema", ["anyOf", 1, "$ref"]) == "schema.anyOf[1].$ref"
    assert format_path("schema", ["properties", "a b", "x_y"]) == 'schema.properties["a b"].x_y'
    assert format_path("value", []) == "value"
    assert format_path("value", [""]) == 'value[""]'

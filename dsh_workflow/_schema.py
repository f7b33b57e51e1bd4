"""The schema gate for ``agent(prompt, {schema})`` and validation of structured child values.

Validation is jsonschema's own (Draft 2020-12); this module only adds the product rules of
SPEC §5 on top and turns every problem into a ``<path>: <message>`` line a model can act on.

Contracts:

- :func:`schema_violations` and :func:`value_violations` never raise, whatever they are given
  (non-JSON input, malformed or huge schemas, nesting deep enough to exhaust the interpreter
  stack): every problem becomes a violation line.
- :func:`check_agent_schema` raises only :class:`WorkflowError` with ``UNSUPPORTED_SCHEMA``.
- Nothing here ever touches the network: a schema must be self-contained, and validators are
  built on an empty ``referencing`` registry, so a remote reference can only fail to resolve.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Iterator
from functools import lru_cache
from itertools import islice
from typing import Any

import regex
from jsonschema import Draft202012Validator, validators
from jsonschema.exceptions import ValidationError, best_match
from referencing import Registry
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012

from ._errors import WorkflowError, WorkflowErrorCode

__all__ = [
    "DIALECT_URI",
    "MAX_SCHEMA_DEPTH",
    "check_agent_schema",
    "compiled_validator",
    "format_path",
    "schema_violations",
    "value_violations",
]

DIALECT_URI = "https://json-schema.org/draft/2020-12/schema"
"""The only ``$schema`` a structured-output schema may declare."""

MAX_SCHEMA_DEPTH = 64
"""Deepest JSON nesting (objects and arrays) a schema may have; keeps checks off the stack limit."""

_BASE_URI = "https://dsh-workflow.invalid/agent-schema.json"
_MAX_MESSAGE = 300
_MAX_LISTED = 50

# Keywords whose values are subschemas, per shape (Draft 2020-12, plus the legacy
# ``definitions`` that JSON pointers can still reach).
_SCHEMA_KEYWORDS = (
    "additionalProperties",
    "propertyNames",
    "items",
    "contains",
    "not",
    "if",
    "then",
    "else",
    "unevaluatedItems",
    "unevaluatedProperties",
    "contentSchema",
)
_LIST_KEYWORDS = ("allOf", "anyOf", "oneOf", "prefixItems")
_MAP_KEYWORDS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")

_META_VALIDATOR = Draft202012Validator(
    Draft202012Validator.META_SCHEMA, format_checker=Draft202012Validator.FORMAT_CHECKER
)


def format_path(root: str, parts: Any) -> str:
    """``root`` followed by ``parts``: ``.name`` for identifier keys, ``[i]`` for indexes,
    ``["odd key"]`` (JSON-quoted) for any other key. Example: ``value.items[2].name``."""
    out = [root]
    for part in parts:
        if isinstance(part, int) and not isinstance(part, bool):
            out.append(f"[{part}]")
        elif isinstance(part, str) and part and (part.replace("_", "a").replace("$", "a").isalnum()):
            out.append(f".{part}")
        else:
            out.append(f"[{json.dumps(str(part), ensure_ascii=False)}]")
    return "".join(out)


def _short(text: str) -> str:
    return text if len(text) <= _MAX_MESSAGE else text[: _MAX_MESSAGE - 1] + "…"


def _json_problems(node: object) -> list[str]:
    """Where ``node`` is not JSON data or nests deeper than :data:`MAX_SCHEMA_DEPTH` (iterative)."""
    problems: list[str] = []
    stack: list[tuple[object, tuple[Any, ...]]] = [(node, ())]
    while stack and len(problems) < _MAX_LISTED:
        item, path = stack.pop()
        if len(path) > MAX_SCHEMA_DEPTH:
            where = _short(format_path("schema", path[:8]) + "…")
            return [*problems, f"{where}: nested deeper than {MAX_SCHEMA_DEPTH} levels"]
        if isinstance(item, dict):
            for key, value in reversed(list(item.items())):
                if not isinstance(key, str):
                    problems.append(f"{format_path('schema', path)}: key {key!r} is not a string")
                else:
                    stack.append((value, (*path, key)))
        elif isinstance(item, list):
            stack.extend((value, (*path, i)) for i, value in reversed(list(enumerate(item))))
        elif isinstance(item, float) and not math.isfinite(item):
            problems.append(f"{format_path('schema', path)}: {item!r} is not a JSON number")
        elif item is not None and not isinstance(item, (str, int, float, bool)):
            problems.append(f"{format_path('schema', path)}: a {type(item).__name__} is not JSON data")
    return problems


def _describe(error: ValidationError, root: str) -> str:
    message = error.message
    if error.context:
        detail = best_match(error.context)
        message = f"{message} ({detail.message})"
    return f"{format_path(root, error.absolute_path)}: {_short(message)}"


def _metaschema_problems(schema: dict[str, Any]) -> list[str]:
    seen: dict[str, None] = {}
    for error in _META_VALIDATOR.iter_errors(schema):
        seen.setdefault(_describe(error, "schema"), None)
        if len(seen) >= _MAX_LISTED:
            break
    return list(seen)


def _subschemas(node: dict[str, Any], path: tuple[Any, ...]) -> Iterator[tuple[object, tuple[Any, ...]]]:
    """The subschemas of ``node`` with their paths, tolerating malformed keyword values."""
    for keyword in _SCHEMA_KEYWORDS:
        if keyword in node:
            yield node[keyword], (*path, keyword)
    for keyword in _LIST_KEYWORDS:
        value = node.get(keyword)
        if isinstance(value, list):
            for i, sub in enumerate(value):
                yield sub, (*path, keyword, i)
    for keyword in _MAP_KEYWORDS:
        value = node.get(keyword)
        if isinstance(value, dict):
            for name, sub in value.items():
                yield sub, (*path, keyword, name)


def _reference_problems(schema: dict[str, Any]) -> list[str]:
    """Non-local, unresolvable or foreign-dialect references anywhere in the schema."""
    problems: list[str] = []
    try:
        root = DRAFT202012.create_resource(schema)
        registry = Registry().with_resource(_BASE_URI, root)
        try:
            registry = registry.crawl()  # registers embedded "$id" resources
        except Exception:
            pass  # a malformed subschema (the metaschema names it); plain "#" refs still resolve
        root_resolver = registry.resolver(_BASE_URI).in_subresource(root)
    except Exception as exc:  # a malformed root "$id"; the metaschema names the cause
        return [f"schema: references cannot be resolved ({_short(str(exc))})"]
    stack = [(schema, (), root_resolver)]
    while stack and len(problems) < _MAX_LISTED:
        node, path, resolver = stack.pop()
        if not isinstance(node, dict):
            continue
        if path:
            try:
                resolver = resolver.in_subresource(DRAFT202012.create_resource(node))
            except Exception as exc:
                problems.append(f"{format_path('schema', path)}: cannot be resolved ({_short(str(exc))})")
                continue
        dialect = node.get("$schema")
        if dialect is not None and dialect not in (DIALECT_URI, DIALECT_URI + "#"):
            problems.append(
                f"{format_path('schema', (*path, '$schema'))}: must be {json.dumps(DIALECT_URI)} "
                "(only Draft 2020-12 is supported); omit it or use that URI"
            )
        for keyword in ("$ref", "$dynamicRef"):
            ref = node.get(keyword)
            if not isinstance(ref, str):
                continue
            where = format_path("schema", (*path, keyword))
            if not ref.startswith("#"):
                problems.append(
                    f"{where}: {json.dumps(ref)} points outside the schema; the schema must be "
                    'self-contained: put the definition under "$defs" and use "#/$defs/<name>"'
                )
                continue
            try:
                resolver.lookup(ref)
            except Unresolvable:
                problems.append(f"{where}: {json.dumps(ref)} does not resolve inside the schema")
            except Exception as exc:
                problems.append(f"{where}: {json.dumps(ref)} cannot be resolved ({_short(str(exc))})")
        stack.extend((sub, subpath, resolver) for sub, subpath in reversed(list(_subschemas(node, path))))
    return problems


def schema_violations(schema: object) -> list[str]:
    """Every reason ``schema`` is not a supported structured-output schema; ``[]`` when it is.

    Each line is ``<path>: <message>`` (paths like ``schema.properties.name.type``). Checked:
    the schema is a JSON object holding only JSON data, nested at most
    :data:`MAX_SCHEMA_DEPTH` deep; it passes the Draft 2020-12 metaschema (all errors, with
    ``format: regex`` checked); its root ``type`` is ``"object"``; every ``$ref`` and
    ``$dynamicRef`` is a ``#`` reference that resolves inside the schema; any ``$schema`` is
    the 2020-12 URI. Never raises.
    """
    try:
        return _schema_violations(schema)
    except RecursionError:
        return ["schema: nested too deeply to check"]
    except Exception as exc:  # defensive: the contract is a list, never an exception
        return [f"schema: cannot be checked ({type(exc).__name__}: {_short(str(exc))})"]


def _schema_violations(schema: object) -> list[str]:
    if not isinstance(schema, dict):
        kind = "an array" if isinstance(schema, list) else type(schema).__name__
        return [f'schema: must be a JSON object with "type": "object" (got {kind})']
    problems = _json_problems(schema)
    if problems:
        return problems  # jsonschema cannot be trusted with non-JSON or over-deep input
    problems = _metaschema_problems(schema)
    root_type = schema.get("type")
    if root_type != "object":
        got = "missing" if "type" not in schema else f"got {json.dumps(root_type)}"
        problems.append(f'schema.type: must be "object" (structured output is object-rooted); {got}')
    problems.extend(_reference_problems(schema))
    return problems


def check_agent_schema(schema: object) -> None:
    """Raise ``UNSUPPORTED_SCHEMA`` (fatal) listing every violation unless ``schema`` is supported."""
    violations = schema_violations(schema)
    if violations:
        raise WorkflowError(
            WorkflowErrorCode.UNSUPPORTED_SCHEMA,
            "agent() schema is not a supported JSON Schema — " + "; ".join(violations),
        )


def _canonical(schema: object) -> str:
    return json.dumps(schema, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


# ---- patterns, matched under a time budget ------------------------------------------------
#
# A schema comes from the script and the value from a child (a model), and both are untrusted:
# with Python's backtracking `re`, `pattern: "^(a+)+$"` against 30 characters held the event
# loop for 45 s. jsonschema's three regex-matching keywords are therefore replaced by versions
# that match with the `regex` package under one time budget per validation.

PATTERN_BUDGET_S = 0.05
_budget = threading.local()


def _search(pattern: str, text: str) -> bool | None:
    """``regex.search`` within the validation's remaining budget; None when it ran out."""
    deadline: float = getattr(_budget, "deadline", 0.0)
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        return None
    try:
        return regex.search(pattern, text, timeout=remaining) is not None
    except TimeoutError:
        return None


def _too_slow(pattern: str) -> ValidationError:
    return ValidationError(f"matching the pattern {pattern!r} took too long "
                           f"(over {PATTERN_BUDGET_S:g} s per value); use a simpler pattern")


def _pattern(validator: Any, pattern: str, instance: object, schema: Any) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string"):
        found = _search(pattern, instance)  # type: ignore[arg-type]
        if found is None:
            yield _too_slow(pattern)
        elif not found:
            yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator: Any, patterns: dict[str, Any], instance: object,
                        schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():  # type: ignore[attr-defined]
            found = _search(pattern, key)
            if found is None:
                yield _too_slow(pattern)
                return
            if found:
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(validator: Any, additional: Any, instance: object,
                           schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    declared = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    extras = []
    for key in instance:  # type: ignore[attr-defined]
        if key in declared:
            continue
        matched = False
        for pattern in patterns:
            found = _search(pattern, key)
            if found is None:
                yield _too_slow(pattern)
                return
            if found:
                matched = True
                break
        if not matched:
            extras.append(key)
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)  # type: ignore[index]
    elif additional is False and extras:
        listed = ", ".join(repr(extra) for extra in sorted(extras))
        yield ValidationError(f"additional properties are not allowed ({listed} unexpected)")


_BoundedValidator = validators.extend(Draft202012Validator, {
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties,
})


@lru_cache(maxsize=64)
def _compiled(canonical: str) -> Draft202012Validator:
    return _BoundedValidator(
        json.loads(canonical),
        registry=Registry(),  # empty and without retrieval: no network, ever
        format_checker=Draft202012Validator.FORMAT_CHECKER,
    )


def compiled_validator(schema: dict[str, Any]) -> Draft202012Validator:
    """The cached validator for ``schema`` (LRU keyed by its canonical JSON text).

    Formats are checked with jsonschema's format checker; references resolve only inside the
    schema. Raises ``TypeError``/``ValueError`` when ``schema`` is not JSON data.
    """
    return _compiled(_canonical(schema))


def value_violations(schema: dict[str, Any], value: object, *, limit: int = 10) -> list[str]:
    """Up to ``limit`` reasons ``value`` does not satisfy ``schema``; ``[]`` when it does.

    Lines are ``<path>: <message>`` with paths like ``value.items[2].name``. ``schema`` should
    have passed :func:`schema_violations`; if it cannot be used the problem is reported as a
    ``schema: ...`` line. Lines come in jsonschema's order over the canonical (key-sorted)
    schema, so they are the same for equal schemas. Never raises.
    """
    try:
        validator = compiled_validator(schema)
    except Exception as exc:
        return [f"schema: cannot be used for validation ({type(exc).__name__}: {_short(str(exc))})"]
    _budget.deadline = time.monotonic() + PATTERN_BUDGET_S
    try:
        errors = list(islice(validator.iter_errors(value), max(limit, 0)))
        return [_describe(error, "value") for error in errors]
    except RecursionError:
        return ["value: nested too deeply to validate"]
    except Unresolvable as exc:
        return [f"schema: a reference does not resolve inside the schema ({_short(str(exc))})"]
    except Exception as exc:
        return [f"value: cannot be validated ({type(exc).__name__}: {_short(str(exc))})"]

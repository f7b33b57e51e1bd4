"""``minimal_instance``: a small value meant to satisfy a JSON Schema (for ``EchoProvider``).

A string with a ``pattern`` is generated from the pattern with ``rstr`` (seeded, so the same
seed gives the same value), after a size estimate of the pattern refuses the ones whose strings
could be huge; :func:`schema_instance` also says what is still wrong with the value when no
valid one could be built.

The schema comes from a script, so generation is bounded like the engine's own checks: it
validates candidates with the engine's step-counting validator inside one
:func:`~._schema.validation_budget`, matches ``patternProperties`` with the same bounded
``regex`` matching (compiled only after the pattern-cost analysis, under a time budget), and
stops after a fixed number of steps.
"""

from __future__ import annotations

import copy
import math
import random
import re._parser as sre_parse  # type: ignore[import-not-found]  # no stub; rstr reads patterns with it too
import time
from typing import Any, TypeGuard

import rstr
from referencing import Registry
from referencing.jsonschema import DRAFT202012

from ._schema import (
    SchemaLimits,
    bounded_search,
    compiled_validator,
    validation_budget,
    value_violations,
)

__all__ = ["GENERATION_LIMITS", "GENERATION_MATCH_S", "minimal_instance", "schema_instance"]

GENERATION_LIMITS = SchemaLimits(max_validation_steps=50_000)
"""The budget of one generation: every candidate validation together."""

GENERATION_MATCH_S = 0.05
"""Wall time all pattern matching of one generation may take."""

_MAX_DEPTH = 32  # deepest instance nesting built; recursive "$ref"s stop here
_MAX_STEPS = 20_000  # builds plus validations per call; beyond it the builder answers null
_MAX_BRANCHES = 32  # anyOf/oneOf branches tried per list
_BASE_URI = "https://dsh-workflow.invalid/echo-schema.json"
_MISSING = object()
_PATTERN_TRIES = 8  # strings generated per pattern before giving up on it
_MAX_PATTERN_STRING = 4096  # longest string a pattern may generate (by the estimate)
_UNBOUNDED_REPEAT = 100  # what rstr generates at most for "*", "+" and "{n,}"

_FORMAT_SAMPLES = {
    "date": "1970-01-01",
    "date-time": "1970-01-01T00:00:00Z",
    "time": "00:00:00Z",
    "duration": "P1D",
    "email": "x@example.com",
    "idn-email": "x@example.com",
    "hostname": "example.com",
    "idn-hostname": "example.com",
    "ipv4": "127.0.0.1",
    "ipv6": "::1",
    "uri": "https://example.com/",
    "uri-reference": "https://example.com/",
    "iri": "https://example.com/",
    "iri-reference": "https://example.com/",
    "uri-template": "https://example.com/",
    "uuid": "00000000-0000-4000-8000-000000000000",
    "json-pointer": "",
    "relative-json-pointer": "0",
    "regex": "",
}
_PAD_FRONT = {"email", "idn-email"}  # "xxx@example.com" stays an address

_SKIPPED = {
    "$id", "$schema", "$anchor", "$dynamicAnchor", "$defs", "definitions", "$comment",
    "$vocabulary", "title", "description", "examples", "default", "deprecated", "readOnly",
    "writeOnly",
}  # fmt: skip
_LOWER = {"minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties", "minContains"}
_UPPER = {"maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties", "maxContains"}
_SCHEMA_VALUED = {
    "items", "additionalProperties", "contains", "propertyNames", "unevaluatedItems",
    "unevaluatedProperties",
}  # fmt: skip
_OBJECT_HINTS = {"properties", "required", "minProperties", "maxProperties", "additionalProperties",
                 "patternProperties", "propertyNames", "dependentRequired", "dependentSchemas"}  # fmt: skip
_ARRAY_HINTS = {"items", "prefixItems", "minItems", "maxItems", "contains", "uniqueItems"}
_STRING_HINTS = {"minLength", "maxLength", "pattern", "format"}
_NUMBER_HINTS = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}
_ALL_TYPES = ("null", "object", "string", "number", "boolean", "array")


def _is_number(value: object) -> TypeGuard[int | float]:
    """A finite JSON number (a bool is not one)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _types_of(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [t for t in value if isinstance(t, str)]
    return []


def _intersect_types(a: object, b: object) -> object:
    left, right = _types_of(a), _types_of(b)
    out = [t for t in left if t in right]
    if "integer" not in out and (
        ("integer" in left and "number" in right) or ("number" in left and "integer" in right)
    ):
        out.append("integer")
    return out if out else a  # contradictory: keep the first, best effort


def _merge(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """The conjunction of two flattened schemas, as far as generation needs it."""
    out = dict(a)
    for key, value in b.items():
        if key not in out:
            out[key] = value
            continue
        current = out[key]
        if key in ("properties", "patternProperties") and isinstance(current, dict) and isinstance(value, dict):
            merged = dict(current)
            for name, sub in value.items():
                merged[name] = {"allOf": [merged[name], sub]} if name in merged else sub
            out[key] = merged
        elif key == "required" and isinstance(current, list) and isinstance(value, list):
            out[key] = list(dict.fromkeys(n for n in [*current, *value] if isinstance(n, str)))
        elif key == "type":
            out[key] = _intersect_types(current, value)
        elif key in _LOWER and _is_number(current) and _is_number(value):
            out[key] = max(current, value)
        elif key in _UPPER and _is_number(current) and _is_number(value):
            out[key] = min(current, value)
        elif key == "enum" and isinstance(current, list) and isinstance(value, list):
            out[key] = [m for m in current if m in value] or current
        elif key in _SCHEMA_VALUED:
            out[key] = {"allOf": [current, value]}
        elif key == "not":
            out[key] = {"anyOf": [current, value]}
        # any other clash (const, pattern, format, if, ...): keep the first, best effort
    return out


def _longest(parsed: Any) -> int:
    """The longest string rstr can generate for a parsed pattern (an estimate that errs long;
    unknown constructs count as long)."""
    total = 0
    for op, arg in parsed:
        if op in (sre_parse.MAX_REPEAT, sre_parse.MIN_REPEAT, sre_parse.POSSESSIVE_REPEAT):
            low, high, sub = arg
            times = min(high, _UNBOUNDED_REPEAT) if high != sre_parse.MAXREPEAT else _UNBOUNDED_REPEAT
            total += max(low, times) * _longest(sub)
        elif op is sre_parse.SUBPATTERN:
            total += _longest(arg[-1])
        elif op is sre_parse.BRANCH:
            total += max((_longest(branch) for branch in arg[1]), default=0)
        elif op in (sre_parse.AT, sre_parse.ASSERT, sre_parse.ASSERT_NOT):
            continue
        elif op in (sre_parse.LITERAL, sre_parse.NOT_LITERAL, sre_parse.ANY,
                    sre_parse.IN, sre_parse.CATEGORY, sre_parse.RANGE):
            total += 1
        else:  # a group reference, a conditional, ...: too unknown to bound
            total += _MAX_PATTERN_STRING + 1
        if total > _MAX_PATTERN_STRING:
            break
    return total


def _pattern_strings(pattern: str, rng: random.Random) -> list[str]:
    """Up to :data:`_PATTERN_TRIES` strings generated from ``pattern``, shortest first (Python's reading of it;
    JSON Schema's ECMA-262 patterns mostly agree), or none when it cannot be read or its
    strings could be longer than :data:`_MAX_PATTERN_STRING`."""
    try:
        if _longest(sre_parse.parse(pattern)) > _MAX_PATTERN_STRING:
            return []
        generator = rstr.Rstr(rng)
        # The shortest first: the smallest answer, and the least matching time to check it.
        return sorted((generator.xeger(pattern) for _ in range(_PATTERN_TRIES)), key=len)
    except Exception:  # noqa: BLE001 - a pattern Python cannot generate from gives nothing
        return []


class _Builder:
    """One :func:`minimal_instance` call: the root schema, its resolver, a step budget and the
    seeded random source pattern strings are drawn from."""

    def __init__(self, root: dict[str, Any], seed: str = "") -> None:
        self._random = random.Random(seed)
        self._generated: dict[str, list[str]] = {}  # strings drawn per pattern, drawn once
        self._steps = 0
        try:
            self._validator: Any = compiled_validator(root)
        except Exception:  # noqa: BLE001 - not JSON data: generate without checking candidates
            self._validator = None
        try:
            registry = Registry().with_resource(_BASE_URI, DRAFT202012.create_resource(root))
            try:
                registry = registry.crawl()
            except Exception:  # noqa: BLE001, S110 - a malformed subschema: "#" refs still resolve
                pass
            self._resolver: Any = registry.resolver(_BASE_URI)
        except Exception:  # noqa: BLE001 - unresolvable: "$ref"s then generate null
            self._resolver = None

    # -- references and flattening ---------------------------------------------------------

    def _resolve(self, ref: str) -> object:
        if self._resolver is None or not ref.startswith("#"):
            return None
        try:
            return self._resolver.lookup(ref).contents
        except Exception:  # noqa: BLE001 - a reference that cannot be followed generates null
            return None

    def _flatten(
        self, schema: object, active: frozenset[int]
    ) -> tuple[dict[str, Any], list[list[Any]], frozenset[int], bool]:
        """Merge ``schema`` with its ``$ref`` targets and ``allOf`` members into one dict.

        Returns the merged keywords, the ``anyOf``/``oneOf`` lists still to choose from, the
        ids of the reference targets expanded, and whether one of them was already being
        expanded further up (a recursive reference).
        """
        base: dict[str, Any] = {}
        branches: list[list[Any]] = []
        targets: set[int] = set()
        recursive = False
        pending = [schema]
        while pending:
            node = pending.pop(0)
            if not isinstance(node, dict):
                continue
            rest: dict[str, Any] = {}
            for key, value in node.items():
                if key in ("$ref", "$dynamicRef") and isinstance(value, str):
                    target = self._resolve(value)
                    if target is None:
                        continue
                    recursive = recursive or id(target) in active
                    if id(target) not in targets:
                        targets.add(id(target))
                        pending.append(target)
                elif key == "allOf" and isinstance(value, list):
                    pending.extend(value)
                elif key in ("anyOf", "oneOf") and isinstance(value, list) and value:
                    branches.append(list(value))
                elif key not in _SKIPPED:
                    rest[key] = value
            base = _merge(base, rest)
        return base, branches, frozenset(targets), recursive

    def _reenters(self, schema: object, active: frozenset[int]) -> bool:
        if not isinstance(schema, dict) or not isinstance(schema.get("$ref"), str):
            return False
        target = self._resolve(schema["$ref"])
        return target is not None and id(target) in active

    def _step(self) -> None:
        self._steps += 1
        if self._steps % 32 == 0:
            time.sleep(0)  # hand the GIL over now and then (see ``_schema._tick``)

    def _valid(self, schema: object, candidate: object) -> bool:
        if self._validator is None:
            return True
        self._step()
        try:
            return bool(self._validator.evolve(schema=schema).is_valid(candidate))
        except Exception:  # noqa: BLE001 - a candidate that cannot be checked is not valid
            return False

    # -- generation ------------------------------------------------------------------------

    def build(self, schema: object, depth: int, active: frozenset[int]) -> object:
        self._step()
        if depth > _MAX_DEPTH or self._steps > _MAX_STEPS or not isinstance(schema, dict):
            return None
        base, branches, targets, recursive = self._flatten(schema, active)
        return self._choose(schema, base, branches, depth, active | targets, recursive)

    def _choose(
        self,
        original: dict[str, Any],
        base: dict[str, Any],
        branches: list[list[Any]],
        depth: int,
        active: frozenset[int],
        recursive: bool,
    ) -> object:
        """The first candidate over the branch lists that satisfies ``original``."""
        if not branches:
            return self._conditional(base, depth, active, recursive)
        first, rest = branches[0], branches[1:]
        ordered = sorted(first[:_MAX_BRANCHES], key=lambda b: self._reenters(b, active))
        fallback: object = _MISSING
        for branch in ordered:
            if self._steps > _MAX_STEPS:
                break
            b_base, b_branches, b_targets, b_recursive = self._flatten(branch, active)
            merged = _merge(base, b_base)
            candidate = self._choose(
                original, merged, b_branches + rest, depth, active | b_targets, recursive or b_recursive
            )
            if fallback is _MISSING:
                fallback = candidate
            if self._valid(original, candidate):
                return candidate
            if _is_number(candidate):  # e.g. oneOf number/integer: 0 matches both, 0.5 one
                for nudged in (candidate + 0.5, candidate - 0.5):
                    if self._valid(original, nudged):
                        return nudged
        return None if fallback is _MISSING else fallback

    def _conditional(self, base: dict[str, Any], depth: int, active: frozenset[int], recursive: bool) -> object:
        if "if" not in base:
            return self._typed(base, depth, active, recursive)
        plain = {k: v for k, v in base.items() if k not in ("if", "then", "else")}
        candidate = self._typed(plain, depth, active, recursive)
        if self._valid(base, candidate):
            return candidate
        for key in ("then", "else"):
            if isinstance(base.get(key), dict):
                e_base, e_branches, e_targets, e_rec = self._flatten(base[key], active)
                merged = _merge(plain, e_base)
                other = self._choose(base, merged, e_branches, depth, active | e_targets, recursive or e_rec)
                if self._valid(base, other):
                    return other
        return candidate

    def _typed(self, base: dict[str, Any], depth: int, active: frozenset[int], recursive: bool) -> object:
        if "const" in base:
            return copy.deepcopy(base["const"])
        enum = base.get("enum")
        if isinstance(enum, list) and enum:
            rest = {k: v for k, v in base.items() if k != "enum"}
            return copy.deepcopy(next((m for m in enum if self._valid(rest, m)), enum[0]))
        types = _types_of(base.get("type"))
        if not types:
            hinted = [t for t, hints in (("object", _OBJECT_HINTS), ("array", _ARRAY_HINTS),
                                         ("string", _STRING_HINTS), ("number", _NUMBER_HINTS))
                      if hints & base.keys()]  # fmt: skip
            types = list(dict.fromkeys([*hinted, *_ALL_TYPES]))
        else:
            non_null = [t for t in types if t != "null"]
            nulls = [t for t in types if t == "null"]
            types = [*nulls, *non_null] if recursive else [*non_null, *nulls]
        first: object = _MISSING
        for kind in types:
            candidate = self._of_type(kind, base, depth, active)
            if candidate is _MISSING:
                continue
            if first is _MISSING:
                first = candidate
            if self._valid(base, candidate):
                return candidate
            if kind == "number" and _is_number(candidate):
                # a non-integer keeps a number apart from an integer branch of a oneOf
                for nudged in (candidate + 0.5, candidate - 0.5):
                    if self._valid(base, nudged):
                        return nudged
        return None if first is _MISSING else first

    def _of_type(self, kind: str, base: dict[str, Any], depth: int, active: frozenset[int]) -> object:
        if kind == "object":
            return self._object(base, depth, active)
        if kind == "array":
            return self._array(base, depth, active)
        if kind == "string":
            return self._string(base)
        if kind in ("number", "integer"):
            return _number(base, integer=kind == "integer")
        if kind == "boolean":
            return False
        if kind == "null":
            return None
        return _MISSING

    def _string(self, base: dict[str, Any]) -> str:
        """The format's sample (padded to ``minLength``, cut to ``maxLength``); with a
        ``pattern``, the first string generated from it (padded likewise) that satisfies
        every keyword of ``base``, else that sample."""
        sample = _string(base)
        pattern = base.get("pattern")
        if not isinstance(pattern, str) or self._valid(base, sample):
            return sample
        texts = self._generated.get(pattern)
        if texts is None:
            texts = self._generated[pattern] = _pattern_strings(pattern, self._random)
        for text in texts:
            for candidate in _fitted(base, text):
                if self._valid(base, candidate):
                    return candidate
        return sample

    def _property(self, base: dict[str, Any], name: str, depth: int, active: frozenset[int]) -> object:
        properties = base.get("properties")
        if isinstance(properties, dict) and name in properties:
            return self.build(properties[name], depth + 1, active)
        patterns = base.get("patternProperties")
        if isinstance(patterns, dict):
            for pattern, sub in patterns.items():
                try:
                    matched = bounded_search(pattern, name) is True
                except Exception:  # noqa: BLE001 - a refused or invalid pattern matches nothing
                    matched = False
                if matched:
                    return self.build(sub, depth + 1, active)
        return self.build(base.get("additionalProperties"), depth + 1, active)

    def _object(self, base: dict[str, Any], depth: int, active: frozenset[int]) -> dict[str, Any]:
        required = base.get("required")
        names = [n for n in required if isinstance(n, str)] if isinstance(required, list) else []
        dependent = base.get("dependentRequired")
        if not isinstance(dependent, dict):
            dependent = {}
        out: dict[str, Any] = {}
        i = 0
        while i < len(names):
            name = names[i]
            i += 1
            if name in out:
                continue
            out[name] = self._property(base, name, depth, active)
            extra = dependent.get(name)
            if isinstance(extra, list):
                names.extend(n for n in extra if isinstance(n, str) and n not in names)
        wanted = base.get("minProperties")
        if _is_number(wanted) and len(out) < wanted:
            properties = base.get("properties")
            if not isinstance(properties, dict):
                properties = {}
            spare = [n for n in properties if n not in out]
            if base.get("additionalProperties") is not False:
                spare += [f"x{j}" for j in range(1, int(wanted) + 1) if f"x{j}" not in out]
            for name in spare[: max(0, math.ceil(wanted) - len(out))]:
                out[name] = self._property(base, name, depth, active)
        return out

    def _array(self, base: dict[str, Any], depth: int, active: frozenset[int]) -> list[Any]:
        prefix = base.get("prefixItems")
        if not isinstance(prefix, list):
            prefix = []
        items = base.get("items", True)
        min_items = base.get("minItems")
        count: int | float = min_items if _is_number(min_items) else 0
        contains = base.get("contains")
        matching: int | float = 0
        if contains is not None:
            min_contains = base.get("minContains")
            matching = min_contains if _is_number(min_contains) else 1
            count = max(count, matching)
        unique = base.get("uniqueItems") is True
        out: list[Any] = []
        for i in range(min(math.ceil(count), 10_000)):
            sub = prefix[i] if i < len(prefix) else items
            if i < matching:
                sub = {"allOf": [sub, contains]}
            element = self.build(sub, depth + 1, active) if sub is not True else None
            if unique and element in out:
                element = self._distinct(sub, element, out)
            out.append(element)
        return out

    def _distinct(self, sub: object, element: object, taken: list[Any]) -> object:
        """A variant of ``element`` still valid under ``sub`` and not in ``taken``, if simple."""
        variants: list[object] = []
        if isinstance(sub, dict) and isinstance(sub.get("enum"), list):
            variants += sub["enum"]
        for j in range(1, len(taken) + 2):
            if isinstance(element, str):
                variants += [element + "x" * j, "x" * j + element]
            elif _is_number(element):
                variants += [element + j, element - j]
            elif element is None or isinstance(element, bool):
                variants += [True, False, None, j, str(j)]
        for variant in variants:
            if variant not in taken and self._valid(sub, variant):
                return copy.deepcopy(variant)
        return element


def _bound(base: dict[str, Any], inclusive: str, exclusive: str, pick: Any) -> tuple[float | None, bool]:
    """The tighter of an inclusive and an exclusive bound: (value, is_exclusive)."""
    inc, exc = base.get(inclusive), base.get(exclusive)
    inc = inc if _is_number(inc) else None
    exc = exc if _is_number(exc) else None
    if inc is None:
        return exc, exc is not None
    if exc is None or (pick(inc, exc) == inc and inc != exc):
        return inc, False
    return exc, True


def _number(base: dict[str, Any], *, integer: bool) -> int | float:
    lo, lo_ex = _bound(base, "minimum", "exclusiveMinimum", max)
    hi, hi_ex = _bound(base, "maximum", "exclusiveMaximum", min)
    step = base.get("multipleOf") if _is_number(base.get("multipleOf")) and base["multipleOf"] > 0 else None
    value: float = 0
    try:
        if lo is not None and (value < lo or (lo_ex and value <= lo)):
            if step:
                value = math.ceil(lo / step) * step
                value = value + step if lo_ex and value <= lo else value
            elif integer:
                value = math.floor(lo) + 1 if lo_ex else math.ceil(lo)
            elif lo_ex:
                value = (lo + hi) / 2 if hi is not None else math.floor(lo) + 1
            else:
                value = lo
        elif hi is not None and (value > hi or (hi_ex and value >= hi)):
            if step:
                value = math.floor(hi / step) * step
                value = value - step if hi_ex and value >= hi else value
            elif integer:
                value = math.ceil(hi) - 1 if hi_ex else math.floor(hi)
            elif hi_ex:
                value = (lo + hi) / 2 if lo is not None else math.ceil(hi) - 1
            else:
                value = hi
    except (OverflowError, ValueError):
        value = 0
    if isinstance(value, float) and value.is_integer() and (integer or abs(value) < 2**53):
        return int(value)
    return value


def _padded(base: dict[str, Any], text: str) -> str:
    """``text`` padded with ``"x"`` to ``minLength`` (in front for an e-mail address)."""
    wanted = base.get("minLength")
    if _is_number(wanted) and len(text) < wanted:
        pad = "x" * min(math.ceil(wanted) - len(text), 1_000_000)
        text = pad + text if base.get("format") in _PAD_FRONT else text + pad
    return text


def _fitted(base: dict[str, Any], text: str) -> list[str]:
    """``text`` and its variants fitted to ``minLength``/``maxLength``: cut to the maximum,
    repeated up to the minimum, padded with ``"x"``."""
    most, least = base.get("maxLength"), base.get("minLength")
    variants = [text]
    if _is_number(most) and len(text) > most:
        variants.append(text[: max(0, math.floor(most))])
    if _is_number(least) and 0 < len(text) < least and least <= 1_000_000:
        variants.append((text * math.ceil(least / len(text)))[: math.ceil(least)])
        variants.append(_padded(base, text))
    return variants


def _string(base: dict[str, Any]) -> str:
    fmt = base.get("format")
    text = _padded(base, _FORMAT_SAMPLES.get(fmt, "") if isinstance(fmt, str) else "")
    most = base.get("maxLength")
    if _is_number(most) and len(text) > most and fmt not in _FORMAT_SAMPLES:
        text = text[: max(0, math.floor(most))]
    return text


def minimal_instance(schema: object, seed: str = "") -> object:
    """A small value meant to satisfy ``schema`` (Draft 2020-12), deterministic for a given
    ``seed`` (the strings generated from patterns are drawn from it).

    Honours types (the first non-null type of a list; null first under a recursive
    reference), required properties, ``enum`` (first member that fits), ``const``,
    ``anyOf``/``oneOf`` (the first branch whose candidate validates, which for ``oneOf`` means
    exactly one branch matches), ``allOf`` and ``$ref`` (merged), ``if``/``then``/``else``,
    numeric bounds and ``multipleOf``, ``minLength`` (padded with ``"x"``), ``minItems``,
    ``contains``, ``uniqueItems`` for simple items, ``minProperties``, ``dependentRequired`` and
    common ``format`` values (``date``, ``date-time``, ``time``, ``duration``, ``email``,
    ``hostname``, ``ipv4``, ``ipv6``, ``uri``, ``uuid``, ...), ``maxLength`` and ``pattern``
    (strings generated from it with ``rstr``, seeded by ``seed``). Best effort beyond that:
    ``not``, contradictions and patterns Python cannot read may be left unsatisfied (see
    :func:`schema_instance`). Recursive references stop at a depth guard. Never raises.

    Bounded: at most ``_MAX_STEPS`` builds and validations, :data:`GENERATION_LIMITS`' keyword
    applications and pattern compilation over all its validations, and
    :data:`GENERATION_MATCH_S` of pattern matching (the engine's bounded ``regex`` matching,
    never Python's backtracking ``re``). Still, call it off the event loop for a script's
    schema: it may take up to about a second.
    """
    if not isinstance(schema, dict):
        return None
    try:
        with validation_budget(GENERATION_LIMITS, seconds=GENERATION_MATCH_S):
            return _Builder(schema, seed).build(schema, 0, frozenset())
    except RecursionError:
        return {}


def schema_instance(schema: dict[str, Any], seed: str = "") -> tuple[object, list[str]]:
    """:func:`minimal_instance` of ``schema`` and what is still wrong with it: up to 5
    validator messages with JSON pointers (``[]``: the value is valid). Never raises; call it
    off the event loop."""
    value = minimal_instance(schema, seed)
    return value, value_violations(schema, value, limit=5, pointers=True)

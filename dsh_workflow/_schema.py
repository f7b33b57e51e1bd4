"""The schema gate for ``agent(prompt, {schema})`` and validation of structured child values.

Validation is jsonschema's own (Draft 2020-12); this module only adds the product rules of
docs/scripts.md on top and turns every problem into a ``<path>: <message>`` line a model can act on.

Both the schema (from the script) and the value (from a child) are untrusted, so every check
here is bounded by :class:`SchemaLimits` (the ``EngineConfig`` fields of the same names):

- the gate first measures the schema with one iterative walk that stops at
  ``max_schema_nodes`` JSON values or ``max_schema_chars`` characters of canonical JSON
  (:func:`prepare_schema_check`: cheap enough for the event loop, and it yields the cache key);
- the rest of the gate (the metaschema, references, patterns: :func:`finish_schema_check`)
  costs about half a millisecond per subschema and must run off the event loop; its verdict is
  cached by the canonical text's digest, so a schema is checked once per process;
- every pattern is compiled only after :mod:`._patterns` bounded its compiled size, and at
  most ``max_pattern_cost`` units of patterns are compiled per check;
- value validation counts keyword applications and stops at ``max_validation_steps``, so a
  schema whose ``$ref``/``anyOf`` chains fan out cannot make one value cost exponential work;
  pattern matching shares one time budget per validation.

Contracts:

- :func:`schema_violations` and :func:`value_violations` never raise, whatever they are given
  (non-JSON input, malformed or huge schemas, nesting deep enough to exhaust the interpreter
  stack): every problem becomes a violation line.
- :func:`check_agent_schema` raises only :class:`WorkflowError` with ``UNSUPPORTED_SCHEMA``.
- Nothing here ever touches the network: a schema must be self-contained, and validators are
  built on an empty ``referencing`` registry, so a remote reference can only fail to resolve.
- Everything is thread-safe; budgets are per thread and per call.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import lru_cache
from itertools import islice
from typing import Any

import attrs
import regex
from jsonschema import Draft202012Validator, FormatChecker, validators
from jsonschema.exceptions import ValidationError, best_match
from referencing import Registry
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012

from ._errors import WorkflowError, WorkflowErrorCode
from ._patterns import PatternRefused, compile_bounded, pattern_cost
from ._schema_limits import DEFAULT_LIMITS, SchemaLimits

__all__ = [
    "DEFAULT_LIMITS",
    "DIALECT_URI",
    "MAX_SCHEMA_DEPTH",
    "GateTicket",
    "SchemaLimits",
    "bounded_search",
    "check_agent_schema",
    "compiled_validator",
    "finish_schema_check",
    "format_path",
    "json_pointer",
    "prepare_schema_check",
    "schema_violations",
    "unsupported_schema",
    "validation_budget",
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
_MAP_KEYWORDS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas",
                 "dependencies")




PATTERN_BUDGET_S = 0.05
"""Wall time all pattern matching of one value validation may take."""


# ---- per-call budgets ------------------------------------------------------------------
#
# A budget lives in a thread-local for the duration of one check: the keyword functions and
# the format checker below are called by jsonschema with no way to pass it along.


class _OutOfSteps(Exception):
    """Raised from inside jsonschema when a validation used up its steps."""


@dataclass(eq=False)
class _Budget:
    limits: SchemaLimits
    steps: int
    pattern_units: int
    match_s: float  # seconds of pattern matching left (only matching spends them)
    memo: dict[str, Any]
    branch_depth: int = 0


_local = threading.local()


@contextmanager
def validation_budget(limits: SchemaLimits = DEFAULT_LIMITS, *,
                      seconds: float = PATTERN_BUDGET_S) -> Iterator[None]:
    """Run the enclosed validations (on this thread) within one budget: ``limits``'
    ``max_validation_steps`` keyword applications and ``max_pattern_cost`` units of
    ``format: "regex"`` compilation in all, and ``seconds`` of pattern matching. Running out
    of steps raises ``_OutOfSteps`` out of the validator; the others fail the keyword. Nested
    uses keep the outer budget."""
    if getattr(_local, "budget", None) is not None:
        yield
        return
    _local.budget = _Budget(limits=limits, steps=limits.max_validation_steps,
                            pattern_units=limits.max_pattern_cost,
                            match_s=seconds, memo={})
    try:
        yield
    finally:
        _local.budget = None


def _current() -> _Budget | None:
    return getattr(_local, "budget", None)


_YIELD_EVERY = 64


def _tick() -> None:
    budget = _current()
    if budget is not None:
        budget.steps -= 1
        if budget.steps < 0:
            raise _OutOfSteps
        if budget.steps % _YIELD_EVERY == 0:
            # Hand the GIL over now and then (about every millisecond): a thread that
            # computes without pause keeps it for the whole switch interval each time the
            # event loop's thread asks for it, and a loop that asks often (asyncio's debug
            # mode does, on every callback) then waits tens of milliseconds per turn.
            time.sleep(0)


def _checked_regex(pattern: object) -> bool:
    """The ``regex`` format: compiles under the pattern-cost budget of the current check
    (the whole ``max_pattern_cost`` when there is none)."""
    if not isinstance(pattern, str):
        return True
    budget = _current()
    limit = budget.pattern_units if budget is not None else DEFAULT_LIMITS.max_pattern_cost
    configured = budget.limits.max_pattern_cost if budget is not None else limit
    cost = pattern_cost(pattern, limit)
    if cost > limit:
        raise PatternRefused(
            f"too costly to compile: the patterns of this check expand to more than "
            f"max_pattern_cost={configured} units; use fewer or smaller counted repeats "
            "(+ or * instead of {n} inside {m})")
    if budget is not None:
        budget.pattern_units -= cost
        memo = budget.memo
    else:
        memo = None
    compile_bounded(pattern, configured, memo)
    return True


_FORMAT_CHECKER = FormatChecker(formats=())
_FORMAT_CHECKER.checkers = dict(Draft202012Validator.FORMAT_CHECKER.checkers)
_FORMAT_CHECKER.checks("regex", raises=(PatternRefused, regex.error))(_checked_regex)



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


def json_pointer(parts: Any) -> str:
    """``parts`` as a JSON pointer (RFC 6901, ``~`` and ``/`` escaped); the root is ``/``."""
    escaped = [str(part).replace("~", "~0").replace("/", "~1") for part in parts]
    return "/" + "/".join(escaped)


def _short(text: str) -> str:
    return text if len(text) <= _MAX_MESSAGE else text[: _MAX_MESSAGE - 1] + "…"


def _describe(error: ValidationError, root: str | None) -> str:
    message = error.message
    refused = [sub for sub in (error, *error.context[:_MAX_LISTED])
               if isinstance(sub.cause, PatternRefused)]
    if refused:  # a pattern refused by analysis says so, even inside an anyOf
        message = f"{refused[0].message}: {refused[0].cause}"
    elif error.context:
        detail = best_match(error.context)
        message = f"{message} ({detail.message})"
    if root is None and error.validator == "pattern" and not refused \
            and isinstance(error.validator_value, str):
        # The pattern as written (repr would double its backslashes).
        message = f"{error.instance!r} does not match '{error.validator_value}'"
    where = json_pointer(error.absolute_path) if root is None \
        else format_path(root, error.absolute_path)
    return f"{where}: {_short(message)}"


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
        except Exception:  # noqa: BLE001, S110 - a malformed subschema (the metaschema names it)
            pass  # plain "#" refs still resolve
        root_resolver = registry.resolver(_BASE_URI).in_subresource(root)
    except Exception as exc:  # noqa: BLE001 - a malformed root "$id" (the metaschema names it)
        return [f"schema: references cannot be resolved ({_short(str(exc))})"]
    stack = [(schema, (), root_resolver)]
    while stack and len(problems) < _MAX_LISTED:
        node, path, resolver = stack.pop()
        if not isinstance(node, dict):
            continue
        if path:
            try:
                resolver = resolver.in_subresource(DRAFT202012.create_resource(node))
            except Exception as exc:  # noqa: BLE001 - any failure is reported, not raised
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
            except Exception as exc:  # noqa: BLE001 - any failure is reported, not raised
                problems.append(f"{where}: {json.dumps(ref)} cannot be resolved ({_short(str(exc))})")
        stack.extend((sub, subpath, resolver) for sub, subpath in reversed(list(_subschemas(node, path))))
    return problems


def _size_problems(node: object, limits: SchemaLimits) -> list[str]:
    """Where ``node`` is not JSON data, nests deeper than :data:`MAX_SCHEMA_DEPTH`, or is
    bigger than ``limits`` allow. Iterative, and stops as soon as a size limit is passed, so
    it costs at most about ``max_schema_nodes`` steps whatever it is given.

    This runs on the event loop for every uncached schema, so the common case allocates
    nothing per value (two parallel stacks, no paths): only when it finds a problem does
    the slower walk run again to name where."""
    max_nodes, max_chars = limits.max_schema_nodes, limits.max_schema_chars
    items: list[object] = [node]
    depths: list[int] = [0]
    nodes = chars = 0
    while items:
        item = items.pop()
        depth = depths.pop()
        nodes += 1
        if nodes > max_nodes or chars > max_chars or depth > MAX_SCHEMA_DEPTH:
            return _located_problems(node, limits)
        if type(item) is str:
            chars += len(item) + 2
        elif type(item) is dict:
            chars += 2
            for key in islice(item, max_nodes + 1):
                if type(key) is not str:
                    return _located_problems(node, limits)
                chars += len(key) + 3  # a lower bound: '"key":'
            items.extend(islice(item.values(), max_nodes + 1))
            depths.extend([depth + 1] * min(len(item), max_nodes + 1))
        elif type(item) is list:
            chars += 2
            items.extend(islice(item, max_nodes + 1))
            depths.extend([depth + 1] * min(len(item), max_nodes + 1))
        elif item is None or type(item) in (bool, int) or (type(item) is float and math.isfinite(item)):
            chars += 1
        else:
            return _located_problems(node, limits)
    if chars > max_chars:
        return _located_problems(node, limits)
    return []


def _located_problems(node: object, limits: SchemaLimits) -> list[str]:
    """:func:`_size_problems` with every problem's path (slower: a path per value)."""
    problems: list[str] = []
    nodes = 0
    chars = 0
    max_nodes, max_chars = limits.max_schema_nodes, limits.max_schema_chars
    stack: list[tuple[object, tuple[Any, ...]]] = [(node, ())]
    while stack and len(problems) < _MAX_LISTED:
        item, path = stack.pop()
        nodes += 1
        if nodes > max_nodes:
            return [f"schema: too large: more than {max_nodes} JSON values (max_schema_nodes="
                    f"{max_nodes}); a structured-output schema needs far fewer, so describe "
                    "only the fields you need"]
        if chars > max_chars:
            return [f"schema: too large: more than {max_chars} characters of JSON "
                    f"(max_schema_chars={max_chars}); describe only the fields you need"]
        if len(path) > MAX_SCHEMA_DEPTH:
            where = _short(format_path("schema", path[:8]) + "…")
            return [*problems, f"{where}: nested deeper than {MAX_SCHEMA_DEPTH} levels"]
        if isinstance(item, dict):
            chars += 2
            for key, value in reversed(list(islice(item.items(), max_nodes + 1))):
                if not isinstance(key, str):
                    problems.append(f"{format_path('schema', path)}: key {key!r} is not a string")
                else:
                    chars += len(key) + 3  # a lower bound: '"key":'
                    stack.append((value, (*path, key)))
        elif isinstance(item, list):
            chars += 2
            stack.extend((value, (*path, i))
                         for i, value in reversed(list(enumerate(islice(item, max_nodes + 1)))))
        elif isinstance(item, str):
            chars += len(item) + 2
        elif isinstance(item, float) and not math.isfinite(item):
            problems.append(f"{format_path('schema', path)}: {item!r} is not a JSON number")
        elif item is not None and not isinstance(item, (str, int, float, bool)):
            problems.append(f"{format_path('schema', path)}: a {type(item).__name__} is not JSON data")
        else:
            chars += 1
    if chars > max_chars:
        return [f"schema: too large: more than {max_chars} characters of JSON "
                f"(max_schema_chars={max_chars}); describe only the fields you need"]
    return problems


@dataclass(frozen=True)
class GateTicket:
    """One schema on its way through the gate (from :func:`prepare_schema_check`).

    ``violations`` is the verdict when it is already known (a refused size, a non-JSON input,
    a cached verdict); ``None`` means :func:`finish_schema_check` must still run."""

    schema: object
    key: tuple[SchemaLimits, bytes] | None
    violations: tuple[str, ...] | None


_VERDICTS_KEPT = 512
_verdicts: OrderedDict[tuple[SchemaLimits, bytes], tuple[str, ...]] = OrderedDict()
_verdicts_lock = threading.Lock()


def _canonical(schema: object) -> str:
    return json.dumps(schema, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def prepare_schema_check(schema: object, limits: SchemaLimits = DEFAULT_LIMITS) -> GateTicket:
    """The cheap, bounded first stage of the gate; safe on the event loop.

    Refuses non-objects, non-JSON data, over-deep nesting and anything over
    ``max_schema_nodes``/``max_schema_chars`` (naming the setting), then looks the canonical
    text's digest up in the verdict cache. Costs at most about ``max_schema_nodes`` walk steps
    plus serializing ``max_schema_chars`` characters (about 2 ms at the defaults). Never raises.
    """
    try:
        if not isinstance(schema, dict):
            kind = "an array" if isinstance(schema, list) else type(schema).__name__
            return GateTicket(schema, None,
                              (f'schema: must be a JSON object with "type": "object" (got {kind})',))
        problems = _size_problems(schema, limits)
        if problems:
            return GateTicket(schema, None, tuple(problems))
        text = _canonical(schema)
        if len(text) > limits.max_schema_chars:
            return GateTicket(schema, None, (
                f"schema: too large: {len(text)} characters of JSON (max_schema_chars="
                f"{limits.max_schema_chars}); describe only the fields you need",))
        key = (limits, hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=20).digest())
    except RecursionError:
        return GateTicket(schema, None, ("schema: nested too deeply to check",))
    except Exception as exc:  # noqa: BLE001 - the contract is a verdict, never an exception
        return GateTicket(schema, None,
                          (f"schema: cannot be checked ({type(exc).__name__}: {_short(str(exc))})",))
    with _verdicts_lock:
        verdict = _verdicts.get(key)
        if verdict is not None:
            _verdicts.move_to_end(key)
    return GateTicket(schema, key, verdict)


def finish_schema_check(ticket: GateTicket, limits: SchemaLimits = DEFAULT_LIMITS) -> tuple[str, ...]:
    """The ticket's verdict: ``()`` when the schema is supported, else every violation.

    Runs the expensive stage when the verdict is not known yet (the Draft 2020-12 metaschema
    with bounded ``format: "regex"`` checks, the object root, references) and caches it. Call
    it off the event loop (a worker thread): at the size limits it takes up to about half a
    second. Never raises.
    """
    if ticket.violations is not None:
        return ticket.violations
    try:
        with validation_budget(replace(limits, max_validation_steps=_GATE_STEPS),
                               seconds=_GATE_MATCH_S):
            verdict = tuple(_deep_problems(ticket.schema))  # type: ignore[arg-type]  # a dict once it gets here
    except RecursionError:
        verdict = ("schema: nested too deeply to check",)
    except Exception as exc:  # noqa: BLE001 - the contract is a verdict, never an exception
        verdict = (f"schema: cannot be checked ({type(exc).__name__}: {_short(str(exc))})",)
    if ticket.key is not None:
        with _verdicts_lock:
            _verdicts[ticket.key] = verdict
            _verdicts.move_to_end(ticket.key)
            while len(_verdicts) > _VERDICTS_KEPT:
                _verdicts.popitem(last=False)
    return verdict


def _deep_problems(schema: dict[str, Any]) -> list[str]:
    problems = _metaschema_problems(schema)
    root_type = schema.get("type")
    if root_type != "object":
        got = "missing" if "type" not in schema else f"got {json.dumps(root_type)}"
        problems.append(f'schema.type: must be "object" (structured output is object-rooted); {got}')
    problems.extend(_reference_problems(schema))
    return problems


def schema_violations(schema: object, limits: SchemaLimits = DEFAULT_LIMITS) -> list[str]:
    """Every reason ``schema`` is not a supported structured-output schema; ``[]`` when it is.

    Each line is ``<path>: <message>`` (paths like ``schema.properties.name.type``). Checked:
    the schema is a JSON object holding only JSON data, nested at most
    :data:`MAX_SCHEMA_DEPTH` deep, within ``limits``' size; it passes the Draft 2020-12
    metaschema (all errors, with ``format: regex`` checked by bounded compilation); its root
    ``type`` is ``"object"``; every ``$ref`` and ``$dynamicRef`` is a ``#`` reference that
    resolves inside the schema; any ``$schema`` is the 2020-12 URI. Both stages in one call:
    off the event loop only. Never raises.
    """
    return list(finish_schema_check(prepare_schema_check(schema, limits), limits))


def unsupported_schema(violations: tuple[str, ...] | list[str]) -> WorkflowError:
    """The fatal ``UNSUPPORTED_SCHEMA`` error listing ``violations``."""
    return WorkflowError(
        WorkflowErrorCode.UNSUPPORTED_SCHEMA,
        "agent() schema is not a supported JSON Schema — " + "; ".join(violations),
    )


def check_agent_schema(schema: object, limits: SchemaLimits = DEFAULT_LIMITS) -> None:
    """Raise ``UNSUPPORTED_SCHEMA`` (fatal) listing every violation unless ``schema`` is supported."""
    violations = schema_violations(schema, limits)
    if violations:
        raise unsupported_schema(violations)


# ---- value validation, bounded ---------------------------------------------------------
#
# A schema comes from the script and the value from a child (a model), and both are untrusted:
# with Python's backtracking `re`, `pattern: "^(a+)+$"` against 30 characters held the event
# loop for 45 s, and a 1 KB schema whose `$defs` fan out through `anyOf` makes a 3-character
# value walk 2^n paths. Every keyword application therefore counts against the validation's
# steps, and the keywords that match patterns use the `regex` package under a time budget.


def bounded_search(pattern: str, text: str) -> bool | None:
    """Whether ``pattern`` (compiled through :func:`._patterns.compile_bounded`) matches
    somewhere in ``text``, within the current budget's remaining matching time; None when that
    ran out or there is no budget (call inside :func:`validation_budget`). Raises
    :class:`._patterns.PatternRefused` or ``regex.error`` for a pattern that cannot be used."""
    budget = _current()
    if budget is None:
        return None
    if budget.match_s <= 0:
        return None
    compiled = compile_bounded(pattern, budget.limits.max_pattern_cost, budget.memo)
    # Only the matching itself spends the budget: time the rest of a validation takes (or a
    # busy machine takes from this thread between matches) must not turn a later match into
    # "took too long", or a valid value would be judged by the machine's load.
    started = time.monotonic()
    try:
        # concurrent: the GIL is released while matching, so other threads (the event loop)
        # run during a slow match
        return compiled.search(text, timeout=budget.match_s, concurrent=True) is not None
    except TimeoutError:
        return None
    finally:
        budget.match_s -= time.monotonic() - started


def _too_slow(pattern: str) -> ValidationError:
    return ValidationError(f"matching the pattern {pattern!r} took too long "
                           f"(over {PATTERN_BUDGET_S:g} s per value); use a simpler pattern")


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string"):
        found = bounded_search(pattern, instance)
        if found is None:
            yield _too_slow(pattern)
        elif not found:
            yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(validator: Any, patterns: dict[str, Any], instance: Any,
                        schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            _tick()
            found = bounded_search(pattern, key)
            if found is None:
                yield _too_slow(pattern)
                return
            if found:
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _matching_keys(schema: Any, instance: dict[str, Any]) -> tuple[set[str], str | None]:
    """Keys of ``instance`` matched by a ``patternProperties`` pattern of ``schema``, and the
    pattern that ran out of budget, if one did."""
    matched: set[str] = set()
    patterns = schema.get("patternProperties")
    if not isinstance(patterns, dict):
        return matched, None
    for key in instance:
        for pattern in patterns:
            _tick()
            found = bounded_search(pattern, key)
            if found is None:
                return matched, pattern
            if found:
                matched.add(key)
                break
    return matched, None


def _additional_properties(validator: Any, additional: Any, instance: Any,
                           schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    declared = schema.get("properties", {})
    matched, slow = _matching_keys(schema, instance)
    if slow is not None:
        yield _too_slow(slow)
        return
    extras = [key for key in instance if key not in declared and key not in matched]
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif additional is False and extras:
        listed = ", ".join(repr(extra) for extra in sorted(extras))
        yield ValidationError(f"additional properties are not allowed ({listed} unexpected)")


def _evaluated_keys(validator: Any, instance: dict[str, Any], schema: Any) -> set[str]:
    """The keys of ``instance`` that ``schema`` evaluates (the annotation collection
    ``unevaluatedProperties`` needs), with patterns matched under the budget and every step
    counted. A pattern that runs out of time evaluates nothing."""
    _tick()
    if not isinstance(schema, dict):
        return set()
    keys: set[str] = set()
    for keyword in ("$ref", "$dynamicRef"):
        ref = schema.get(keyword)
        if isinstance(ref, str):
            resolved = validator._resolver.lookup(ref)
            keys |= _evaluated_keys(
                validator.evolve(schema=resolved.contents, _resolver=resolved.resolver),
                instance, resolved.contents)
    properties = schema.get("properties")
    if isinstance(properties, dict):
        keys |= properties.keys() & instance.keys()
    for keyword in ("additionalProperties", "unevaluatedProperties"):
        sub = schema.get(keyword)
        if sub is not None:
            keys |= {key for key, value in instance.items()
                     if not any(True for _ in validator.descend(value, sub))}
    keys |= _matching_keys(schema, instance)[0]
    dependent = schema.get("dependentSchemas")
    if isinstance(dependent, dict):
        for name, sub in dependent.items():
            if name in instance:
                keys |= _evaluated_keys(validator, instance, sub)
    for keyword in ("allOf", "oneOf", "anyOf"):
        for sub in schema.get(keyword, ()):
            if not any(True for _ in validator.descend(instance, sub)):
                keys |= _evaluated_keys(validator, instance, sub)
    if "if" in schema:
        if validator.evolve(schema=schema["if"]).is_valid(instance):
            keys |= _evaluated_keys(validator, instance, schema["if"])
            if "then" in schema:
                keys |= _evaluated_keys(validator, instance, schema["then"])
        elif "else" in schema:
            keys |= _evaluated_keys(validator, instance, schema["else"])
    return keys


def _unevaluated_properties(validator: Any, unevaluated: Any, instance: Any,
                            schema: Any) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    evaluated = _evaluated_keys(validator, instance, schema)
    bad = [key for key in instance
           if key not in evaluated
           and any(True for _ in validator.descend(instance[key], unevaluated,
                                                   path=key, schema_path=key))]
    if bad:
        listed = ", ".join(repr(key) for key in sorted(bad))
        if unevaluated is False:
            yield ValidationError(f"unevaluated properties are not allowed ({listed} unexpected)")
        else:
            yield ValidationError(f"unevaluated properties are not valid under the given schema "
                                  f"({listed} unevaluated and invalid)")


def _branch_failure(instance: object, errors: list[ValidationError]) -> ValidationError:
    """The error of a failed ``anyOf``/``oneOf``, its branches' errors as context but without
    the back-links jsonschema adds (``parent``): a fanned-out schema builds thousands of these,
    and with the links every one is a reference cycle that only the cyclic collector frees —
    in one full collection that holds the GIL, and so the event loop, for a tenth of a second."""
    error = ValidationError(f"{instance!r} is not valid under any of the given schemas")
    error.context = errors
    return error


_KEPT_BRANCH_LEVELS = 2
"""``anyOf``/``oneOf`` nested deeper than this keep no branch errors as context: only the
outer levels name the closest branch, and a fan-out keeps O(depth) errors alive instead of
one per step (thousands of live objects make the collector's full passes long too)."""


def _branches(validator: Any, branches: list[Any], instance: object,
              stop_at_first_valid: bool) -> tuple[list[ValidationError], list[Any]]:
    """The errors of the failing branches (if kept at this depth) and the valid branches;
    stops at the first valid branch when ``stop_at_first_valid``."""
    budget = _current()
    keep = budget is None or budget.branch_depth < _KEPT_BRANCH_LEVELS
    if budget is not None:
        budget.branch_depth += 1
    errors: list[ValidationError] = []
    valid: list[Any] = []
    try:
        for index, branch in enumerate(branches):
            if valid and not stop_at_first_valid:
                if validator.evolve(schema=branch).is_valid(instance):
                    valid.append(branch)
                continue
            found = list(validator.descend(instance, branch, schema_path=index))
            if not found:
                valid.append(branch)
                if stop_at_first_valid:
                    break
            elif keep:
                errors.extend(found)
    finally:
        if budget is not None:
            budget.branch_depth -= 1
    return errors, valid


def _any_of(validator: Any, branches: list[Any], instance: object,
            schema: Any) -> Iterator[ValidationError]:
    errors, valid = _branches(validator, branches, instance, stop_at_first_valid=True)
    if not valid:
        yield _branch_failure(instance, errors)


def _one_of(validator: Any, branches: list[Any], instance: object,
            schema: Any) -> Iterator[ValidationError]:
    errors, valid = _branches(validator, branches, instance, stop_at_first_valid=False)
    if not valid:
        yield _branch_failure(instance, errors)
    elif len(valid) > 1:
        listed = ", ".join(repr(branch) for branch in [*valid[1:], valid[0]])
        yield ValidationError(f"{instance!r} is valid under each of {listed}")


def _counted(keyword: Any) -> Any:
    def apply(validator: Any, value: Any, instance: object, schema: Any) -> Any:
        _tick()
        return keyword(validator, value, instance, schema)
    apply.__name__ = getattr(keyword, "__name__", "keyword")
    return apply


_KEYWORDS = {
    **Draft202012Validator.VALIDATORS,
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties,
    "unevaluatedProperties": _unevaluated_properties,
    "anyOf": _any_of,
    "oneOf": _one_of,
}
_BoundedValidator = validators.extend(
    Draft202012Validator, {name: _counted(fn) for name, fn in _KEYWORDS.items()})
_INIT_FIELDS = [(field.name, field.alias) for field in attrs.fields(Draft202012Validator) if field.init]
_plain_evolve = _BoundedValidator.evolve


def _evolve(self: Any, **changes: Any) -> Any:
    """Every step into a subschema counts, and stays bounded: jsonschema would otherwise pick
    its stock validator for a subschema that declares ``$schema``."""
    _tick()
    evolved = _plain_evolve(self, **changes)
    if type(evolved) is not _BoundedValidator:
        evolved = _BoundedValidator(**{alias: getattr(evolved, name) for name, alias in _INIT_FIELDS})
    return evolved


_BoundedValidator.evolve = _evolve


# The metaschema check uses the same keyword functions (so it yields the GIL like any
# validation); its work is bounded by the schema's size limits, not by the step budget.
_META_VALIDATOR = _BoundedValidator(Draft202012Validator.META_SCHEMA, format_checker=_FORMAT_CHECKER)
_GATE_STEPS = 10**9
_GATE_MATCH_S = 60.0  # the metaschema's own (linear) patterns; script patterns are only compiled


@lru_cache(maxsize=32)
def _compiled(canonical: str) -> Draft202012Validator:
    return _BoundedValidator(
        json.loads(canonical),
        registry=Registry(),  # empty and without retrieval: no network, ever
        format_checker=_FORMAT_CHECKER,
    )


def compiled_validator(schema: dict[str, Any]) -> Draft202012Validator:
    """The cached validator for ``schema`` (LRU keyed by its canonical JSON text).

    Formats are checked with jsonschema's format checker (``regex`` by bounded compilation);
    references resolve only inside the schema. Its keyword applications count against the
    current :func:`validation_budget` and patterns only match inside one. Raises
    ``TypeError``/``ValueError`` when ``schema`` is not JSON data.
    """
    return _compiled(_canonical(schema))


def value_violations(schema: dict[str, Any], value: object, *, limit: int = 10,
                     limits: SchemaLimits = DEFAULT_LIMITS, pointers: bool = False) -> list[str]:
    """Up to ``limit`` reasons ``value`` does not satisfy ``schema``; ``[]`` when it does.

    Lines are ``<path>: <message>`` with paths like ``value.items[2].name`` (``pointers``:
    JSON pointers such as ``/items/2/name``, the root ``/``). ``schema`` should
    have passed :func:`schema_violations`; if it cannot be used the problem is reported as a
    ``schema: ...`` line. Lines come in jsonschema's order over the canonical (key-sorted)
    schema, so they are the same for equal schemas. The work is bounded by ``limits``'
    ``max_validation_steps`` (one ``value: ...`` line naming it when they run out) and
    :data:`PATTERN_BUDGET_S` of pattern matching; still, call it off the event loop. Never
    raises.
    """
    try:
        validator = compiled_validator(schema)
    except Exception as exc:  # noqa: BLE001 - an unusable schema is a listed problem, not a raise
        return [f"schema: cannot be used for validation ({type(exc).__name__}: {_short(str(exc))})"]
    try:
        with validation_budget(limits):
            errors = list(islice(validator.iter_errors(value), max(limit, 0)))
            return [_describe(error, None if pointers else "value") for error in errors]
    except _OutOfSteps:
        steps = limits.max_validation_steps
        return [f"value: validation stopped after {steps} steps (max_validation_steps={steps}); "
                "the schema's branches and references fan out too much to check this value"]
    except RecursionError:
        return ["value: nested too deeply to validate"]
    except Unresolvable as exc:
        return [f"schema: a reference does not resolve inside the schema ({_short(str(exc))})"]
    except Exception as exc:  # noqa: BLE001 - a failing validation is a listed problem, not a raise
        return [f"value: cannot be validated ({type(exc).__name__}: {_short(str(exc))})"]

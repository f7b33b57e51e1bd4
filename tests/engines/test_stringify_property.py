"""Property test: a workflow's return value is what ``JSON.parse(JSON.stringify(v))`` gives.

Hypothesis builds nested JavaScript values — objects and arrays holding ``undefined``, NaN,
±Infinity, functions, symbols, Dates, Maps, Sets, Promises, class instances, errors, boxed
primitives, objects with ``toJSON``, sparse arrays — and each script returns both
``JSON.stringify([0, v])`` as QuickJS itself computes it and ``v`` itself (at index 1 both), so the engine's own
conversion is compared with the reference inside the same engine. The warnings are checked
against a model: one per lossy step (an ``undefined`` object property and ``toJSON`` are not
lossy), bounded at 20 plus a ``... and N more`` line, every path inside the value.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dsh_workflow import (
    EchoProvider,
    EngineConfig,
    QuickJSEngine,
    SubprocessEngine,
    WorkflowStartRequest,
)

META = {"name": "stringify", "description": "return value conversion"}
CONFIG = EngineConfig(slice_cpu_limit_s=2.0, warm_runtimes=0)

# (JavaScript, kind): kind says what JSON.stringify does with it, for the warning model.
LEAVES: list[tuple[str, str]] = [
    ("null", "plain"), ("true", "plain"), ("false", "plain"), ("0", "plain"), ("-0", "plain"),
    ("1.5", "plain"), ("'text'", "plain"), ("'quote \" and \\\\ slash'", "plain"),
    ("undefined", "undefined"), ("NaN", "nonfinite"), ("Infinity", "nonfinite"),
    ("-Infinity", "nonfinite"), ("() => 1", "drop"), ("function named() {}", "drop"),
    ("Symbol('s')", "drop"), ("new Date(86400000)", "plain"), ("new Date(NaN)", "plain"),
    ("new Map([[1, 2]])", "exotic"), ("new Set([1, 2])", "exotic"),
    ("Promise.resolve(1)", "exotic"), ("new Error('e')", "exotic"),
    ("new (class Point { constructor() { this.x = 1; } })()", "exotic"),
    ("new Number(7)", "plain"), ("new String('boxed')", "plain"), ("new Boolean(true)", "plain"),
    ("{toJSON(key) { return 'k:' + key; }}", "plain"),
    ("{toJSON() { return undefined; }}", "undefined"),
    ("{toJSON() { return [1, 2]; }}", "plain"),
    ("Object.create(null)", "plain"),
]
KEYS = ["a", "b", "key with space", "__proto__", "0", "é", ""]


@dataclass(frozen=True)
class Leaf:
    js: str
    kind: str


@dataclass(frozen=True)
class Arr:
    items: tuple[Any, ...]  # a node, or None for an empty slot


@dataclass(frozen=True)
class Obj:
    entries: tuple[tuple[str, Any], ...]


def leaf_at(index: int) -> Leaf:
    return Leaf(*LEAVES[index])


def slot(drawn: tuple[Any, int]) -> Any:
    """An array slot: the node, or (one time in four) an empty slot."""
    return None if drawn[1] == 0 else drawn[0]


def array(items: list[Any]) -> Arr:
    return Arr(tuple(items))


def obj(entries: list[tuple[int, Any]]) -> Obj:
    return Obj(tuple((KEYS[k], v) for k, v in entries))


def containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(st.tuples(inner, st.integers(0, 3)).map(slot), max_size=4).map(array),
        st.lists(st.tuples(st.integers(0, len(KEYS) - 1), inner), max_size=4,
                 unique_by=first).map(obj))


def first(pair: tuple[int, Any]) -> int:
    return pair[0]


def nodes() -> st.SearchStrategy[Any]:
    return st.recursive(st.integers(0, len(LEAVES) - 1).map(leaf_at), containers, max_leaves=12)


def render(node: Any) -> str:
    if isinstance(node, Leaf):
        return node.js
    if isinstance(node, Arr):
        # an empty slot is an elision; a trailing one needs its own comma to count
        parts = ["" if item is None else render(item) for item in node.items]
        return "[" + ", ".join(parts) + ("," if node.items and node.items[-1] is None else "") + "]"
    # computed keys: an own property even for "__proto__"
    return "{" + ", ".join(f"[{json.dumps(k)}]: {render(v)}" for k, v in node.entries) + "}"


def losses(node: Any, in_array: bool) -> int:
    """How many warnings JSON.stringify's lossy steps on ``node`` make (the model)."""
    if node is None:  # an empty slot of an array
        return 1
    if isinstance(node, Leaf):
        if node.kind == "undefined":
            return 1 if in_array else 0
        return 0 if node.kind == "plain" else 1
    if isinstance(node, Arr):
        return sum(losses(item, True) for item in node.items)
    return sum(losses(v, False) for _, v in node.entries)


def script_for(node: Any) -> str:
    return (f"const make = () => ({render(node)});\n"
            "return [JSON.stringify([0, make()]), make()];")


async def run_all(engine_kind: str, nodes_: list[Any]) -> list[Any]:
    provider = EchoProvider()
    engine = (QuickJSEngine(CONFIG, provider=provider) if engine_kind == "quickjs"
              else SubprocessEngine(CONFIG, provider=provider, pool_size=0))
    results = []
    async with engine:
        for node in nodes_:
            run = engine.start(WorkflowStartRequest(meta=META, script=script_for(node)))
            try:
                results.append(await run.result())
            finally:
                await run.dispose()
    return results


def check(node: Any, result: Any) -> None:
    assert result.stop_reason == "completed", (render(node), result)
    expected_text, actual = result.value
    expected = json.loads(expected_text)[1]  # at the same index, so toJSON sees the same key
    assert actual == expected, render(node)
    lost = losses(node, True)  # the value sits in the script's returned array
    shown = min(lost, 20) + (1 if lost > 20 else 0)
    assert len(result.warnings) == shown, (render(node), result.warnings)
    for warning in result.warnings[:20]:
        assert warning.startswith("return value[1]"), warning
    if lost > 20:
        assert result.warnings[-1] == f"... and {lost - 20} more"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(node=nodes())
def test_quickjs_return_value_is_json_stringify(node: Any) -> None:
    [result] = anyio.run(run_all, "quickjs", [node], backend="trio")
    check(node, result)


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(batch=st.lists(nodes(), min_size=6, max_size=6))
def test_subprocess_return_value_is_json_stringify(batch: list[Any]) -> None:
    results = anyio.run(run_all, "subprocess", batch, backend="trio")
    for node, result in zip(batch, results, strict=True):
        check(node, result)


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
def test_many_losses_are_bounded_on_both_backends(backend: str) -> None:
    node = Arr(tuple(Leaf("NaN", "nonfinite") for _ in range(25)))
    [result] = anyio.run(run_all, "quickjs", [node], backend=backend)
    check(node, result)
    assert result.warnings[-1] == "... and 5 more"

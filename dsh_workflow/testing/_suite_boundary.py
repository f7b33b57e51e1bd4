"""Values entering (``args``) and leaving (the return value) the script (README, "Writing a script")."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from .._subagent import SubagentResult
from ._doubles import FunctionProvider
from ._suite_base import ConformanceBase, assert_run_error

__all__ = ["BoundarySuite"]

TRICKY_TEXT = "naïve ✓ \x00 nul, \ud800 lone surrogate, 😀 astral, \u2028 separator"


class BoundarySuite(ConformanceBase):
    """``args`` in, the return value out: JSON data only, copied, exact.

    Checks: ``args`` is a deep copy (script mutation never reaches the caller), absent args
    leave ``args`` undefined, scalars pass through, text crosses exactly (NUL, lone surrogates,
    astral characters); on the way out an ``undefined`` property is dropped and a top-level
    ``undefined`` is ``None``, while functions, symbols, bigints, NaN/Infinity, ``undefined``
    in arrays, cycles, sparse arrays, Dates, Maps, class instances and throwing getters are
    RESULT_UNSERIALIZABLE naming the path; a DAG, a ``__proto__`` key and a null-prototype
    object are fine.
    """

    # ---- args -----------------------------------------------------------------------------

    @pytest.mark.anyio
    async def test_args_are_a_deep_copy(self) -> None:
        args = {"files": ["a.ts"], "nested": {"n": 1}}
        before = copy.deepcopy(args)
        script = """
            args.files.push('b.ts');
            args.nested.n = 2;
            args.added = true;
            return {count: args.files.length, n: args.nested.n};"""
        async with self.open() as h:
            result = await h.run(script, args=args)
            assert result.value == {"count": 2, "n": 2}
            assert args == before
            again = await h.run("return args", args=args)
            assert again.value == before

    @pytest.mark.anyio
    async def test_args_absent_leaves_the_global_undefined(self) -> None:
        async with self.open() as h:
            result = await h.run("return [typeof args, typeof globalThis.args]")
            assert result.value == ["undefined", "undefined"]

    @pytest.mark.anyio
    @pytest.mark.parametrize(("args", "expression", "expected"), [
        pytest.param(21, "args * 2", 42, id="number"),
        pytest.param(0, "args === 0", True, id="zero"),
        pytest.param(False, "args === false", True, id="false"),
        pytest.param("", "args === ''", True, id="empty-string"),
        pytest.param("text", "args + '!'", "text!", id="string"),
        pytest.param([1, 2], "Array.isArray(args) && args.length", 2, id="array"),
    ])
    async def test_args_scalars_pass_through(self, args: Any, expression: str,
                                             expected: Any) -> None:
        async with self.open() as h:
            assert (await h.run(f"return {expression}", args=args)).value == expected

    @pytest.mark.anyio
    async def test_args_round_trip_exactly(self) -> None:
        args = {"text": TRICKY_TEXT, "big": 2**53, "float": 0.1, "neg": -5, "deep": [[[{}]]],
                "empty": {}, "none": None, "__proto__": {"polluted": 1}}
        script = "return {args, clean: ({}).polluted === undefined, own: Object.keys(args)}"
        async with self.open() as h:
            value = (await h.run(script, args=args)).value
            assert value["args"] == args
            assert value["clean"] is True and "__proto__" in value["own"]

    # ---- return value ---------------------------------------------------------------------

    @pytest.mark.anyio
    async def test_value_text_crosses_exactly(self) -> None:
        provider = FunctionProvider(lambda request: SubagentResult(text=request.prompt + "|"))
        script = "const t = await agent(args.t); return {t, length: t.length, mine: args.t}"
        async with self.open(provider) as h:
            result = await h.run(script, args={"t": TRICKY_TEXT})
            assert provider.requests[0].prompt == TRICKY_TEXT
            assert result.value == {"t": TRICKY_TEXT + "|", "length": len(
                (TRICKY_TEXT + "|").encode("utf-16-le", "surrogatepass")) // 2,
                "mine": TRICKY_TEXT}

    @pytest.mark.anyio
    async def test_value_undefined_properties_are_dropped(self) -> None:
        async with self.open() as h:
            result = await h.run("return {a: 1, b: undefined, c: {d: undefined, e: [null]}}")
            assert result.value == {"a": 1, "c": {"e": [None]}}

    @pytest.mark.anyio
    @pytest.mark.parametrize("script", ["return", "return undefined", "const x = 1;",
                                        "await agent('x')", "return void 0"])
    async def test_value_top_level_undefined_is_none(self, script: str) -> None:
        async with self.open() as h:
            result = await h.run(script)
            assert (result.stop_reason, result.value) == ("completed", None)

    @pytest.mark.anyio
    @pytest.mark.parametrize(("expression", "path"), [
        pytest.param("{f: () => 1}", ".f", id="function"),
        pytest.param("{s: Symbol('x')}", ".s", id="symbol"),
        pytest.param("{b: 10n}", ".b", id="bigint"),
        pytest.param("{n: NaN}", ".n", id="nan"),
        pytest.param("[1, Infinity]", "[1]", id="infinity"),
        pytest.param("{x: -Infinity}", ".x", id="minus-infinity"),
        pytest.param("[1, undefined]", "[1]", id="undefined-in-array"),
        pytest.param("(() => { const o = {a: {}}; o.a.self = o; return o; })()", ".a.self",
                     id="cycle"),
        pytest.param("[1, , 3]", "[1]", id="sparse-array"),
        pytest.param("{d: new Date(0)}", ".d", id="date"),
        pytest.param("{m: new Map([[1, 2]])}", ".m", id="map"),
        pytest.param("{s: new Set([1])}", ".s", id="set"),
        pytest.param("{c: new (class Point { constructor() { this.x = 1; } })()}", ".c",
                     id="class-instance"),
        pytest.param("{e: new Error('x')}", ".e", id="error-object"),
        pytest.param("{t: new Uint8Array(2)}", ".t", id="typed-array"),
        pytest.param("{a: {b: [0, {c: () => 1}]}}", ".a.b[1].c", id="nested-path"),
        pytest.param("{get x() { throw new Error('read failed'); }}", ".x", id="throwing-getter"),
        pytest.param("{[Symbol('k')]: 1}", "", id="symbol-key"),
        pytest.param("() => 1", "", id="top-level-function"),
        pytest.param("Symbol('top')", "", id="top-level-symbol"),
        pytest.param("NaN", "", id="top-level-nan"),
    ])
    async def test_value_non_json_is_rejected_with_its_path(self, expression: str,
                                                            path: str) -> None:
        async with self.open() as h:
            result = await h.run(f"return {expression};")
            assert_run_error(result, path, code="RESULT_UNSERIALIZABLE")

    @pytest.mark.anyio
    async def test_value_shared_subobjects_are_fine(self) -> None:
        script = "const leaf = {v: 1}; const arr = [leaf]; return {a: leaf, b: leaf, c: [arr, arr]}"
        async with self.open() as h:
            result = await h.run(script)
            assert result.value == {"a": {"v": 1}, "b": {"v": 1}, "c": [[{"v": 1}], [{"v": 1}]]}

    @pytest.mark.anyio
    async def test_value_proto_key_is_an_ordinary_key(self) -> None:
        script = """
            const parsed = JSON.parse('{"__proto__": {"polluted": 1}, "ok": 2}');
            const defined = {};
            Object.defineProperty(defined, '__proto__', {value: 5, enumerable: true});
            return {parsed, defined, clean: ({}).polluted === undefined};"""
        async with self.open() as h:
            result = await h.run(script)
            assert result.value == {"parsed": {"__proto__": {"polluted": 1}, "ok": 2},
                                    "defined": {"__proto__": 5}, "clean": True}

    @pytest.mark.anyio
    async def test_value_null_prototype_object_is_fine(self) -> None:
        async with self.open() as h:
            result = await h.run("const o = Object.create(null); o.a = 1; o.b = [o.a];"
                                 " return {o}")
            assert result.value == {"o": {"a": 1, "b": [1]}}

    @pytest.mark.anyio
    async def test_value_getters_cross_as_their_values(self) -> None:
        script = """
            const o = {get x() { return 7; }};
            Object.defineProperty(o, 'hidden', {value: () => 1, enumerable: false});
            return o;"""
        async with self.open() as h:
            assert (await h.run(script)).value == {"x": 7}

    @pytest.mark.anyio
    async def test_value_returned_promise_is_awaited(self) -> None:
        async with self.open() as h:
            assert (await h.run("return agent('x')")).value == "ok:x"

    @pytest.mark.anyio
    async def test_value_numbers_cross_as_json(self) -> None:
        async with self.open() as h:
            result = await h.run("return [1, -0, 0.1, 2 ** 53, 1e300, -1.5e-7]")
            assert result.value == [1, 0, 0.1, 2**53, 1e300, -1.5e-7]

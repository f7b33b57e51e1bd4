"""Values entering (``args``) and leaving (the return value) the script (docs/scripts.md)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from .._subagent import SubagentResult
from ._doubles import FunctionProvider
from ._suite_base import ConformanceBase, assert_run_error

__all__ = ["BoundarySuite"]

TRICKY_TEXT = "naïve ✓ \x00 nul, \ud800 lone surrogate, 😀 astral, \u2028 separator"
#: What leaves the script (and reaches a provider) of it: text UTF-8 can hold (SPEC §24).
VALID_TEXT = TRICKY_TEXT.replace("\ud800", "\ufffd")


class BoundarySuite(ConformanceBase):
    """``args`` in, the return value out: JSON data only, copied, exact.

    Checks: ``args`` is a deep copy (script mutation never reaches the caller), absent args
    leave ``args`` undefined, scalars pass through, text crosses exactly into the script (NUL,
    lone surrogates, astral characters) and leaves it as text UTF-8 can hold (a lone surrogate
    in a prompt, log or the return value becomes U+FFFD, with a warning naming the hook or
    where in the value);
    on the way out the value is JSON as ``JSON.stringify`` makes it: an
    ``undefined`` property is dropped and a top-level ``undefined`` is ``None`` (no warning),
    functions and symbols are dropped from objects and null in arrays, NaN/Infinity become
    null, ``toJSON`` is honoured (a Date is its ISO string), a Map, Set or Promise becomes
    ``{}`` — each lossy step with a warning naming its path, bounded; bigints and cycles are
    RESULT_UNSERIALIZABLE naming the path; a throw from a getter or ``toJSON`` is the script's
    own error; a DAG, a ``__proto__`` key and a null-prototype object are fine; hook options
    stay strict.
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
        script = ("return {args, clean: ({}).polluted === undefined, own: Object.keys(args), "
                  "exact: args.text.includes('\\ud800')}")
        async with self.open() as h:
            result = await h.run(script, args=args)
            value = result.value
            assert value["args"] == {**args, "text": VALID_TEXT}
            assert value["clean"] is True and "__proto__" in value["own"]
            assert value["exact"] is True  # the script saw the lone surrogate itself
            assert "return value.args.text: a lone surrogate became U+FFFD" in result.warnings

    # ---- return value ---------------------------------------------------------------------

    @pytest.mark.anyio
    async def test_value_text_crosses_exactly(self) -> None:
        provider = FunctionProvider(lambda request: SubagentResult(text=request.prompt + "|"))
        script = "const t = await agent(args.t); return {t, length: t.length, mine: args.t}"
        async with self.open(provider) as h:
            result = await h.run(script, args={"t": TRICKY_TEXT})
            assert provider.requests[0].prompt == VALID_TEXT
            assert result.value == {"t": VALID_TEXT + "|", "length": len(
                (TRICKY_TEXT + "|").encode("utf-16-le", "surrogatepass")) // 2,
                "mine": VALID_TEXT}
            assert "text given to agent(): a lone surrogate became U+FFFD" in result.warnings

    @pytest.mark.anyio
    async def test_hook_text_that_utf8_cannot_hold_is_named_once_per_hook(self) -> None:
        script = """
            for (let i = 0; i < 3; i++) log('half an emoji \\ud83d ' + i);
            phase('\\ude00 phase');
            return 'done'"""
        async with self.open() as h:
            result = await h.run(script)
            assert result.value == "done"
            assert [w for w in result.warnings if w.startswith("text given to")] == [
                "text given to log(): a lone surrogate became U+FFFD",
                "text given to phase(): a lone surrogate became U+FFFD"]

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
        pytest.param("{b: 10n}", ".b", id="bigint"),
        pytest.param("[1, {b: 2n}]", "[1].b", id="nested-bigint"),
        pytest.param("(() => { const o = {a: {}}; o.a.self = o; return o; })()", ".a.self",
                     id="cycle"),
        pytest.param("(() => { const a = [1]; a.push({a}); return a; })()", "[1].a",
                     id="array-cycle"),
        pytest.param("(() => { const r = Proxy.revocable({}, {}); r.revoke(); return {p: r.proxy}; })()",
                     ".p", id="revoked-proxy"),
    ])
    async def test_value_bigints_and_cycles_are_refused_with_their_path(
            self, expression: str, path: str) -> None:
        async with self.open() as h:
            result = await h.run(f"return {expression};")
            assert_run_error(result, "return value" + path, code="RESULT_UNSERIALIZABLE")

    @pytest.mark.anyio
    @pytest.mark.parametrize(("expression", "value", "warnings"), [
        pytest.param("{f: () => 1, a: 1}", {"a": 1}, ["return value.f: a function was dropped"],
                     id="function-in-object"),
        pytest.param("[1, () => 1]", [1, None], ["return value[1]: a function became null"],
                     id="function-in-array"),
        pytest.param("{s: Symbol('x')}", {}, ["return value.s: a symbol was dropped"], id="symbol"),
        pytest.param("{n: NaN}", {"n": None}, ["return value.n: NaN became null"], id="nan"),
        pytest.param("[1, Infinity]", [1, None], ["return value[1]: Infinity became null"],
                     id="infinity"),
        pytest.param("{x: -Infinity}", {"x": None}, ["return value.x: -Infinity became null"],
                     id="minus-infinity"),
        pytest.param("{items: [1, 2, undefined]}", {"items": [1, 2, None]},
                     ["return value.items[2]: undefined became null"], id="undefined-in-array"),
        pytest.param("[1, , 3]", [1, None, 3],
                     ["return value[1]: an empty slot of a sparse array became null"],
                     id="sparse-array"),
        pytest.param("{m: new Map([[1, 2]])}", {"m": {}}, ["return value.m: a Map became {}"],
                     id="map"),
        pytest.param("{s: new Set([1])}", {"s": {}}, ["return value.s: a Set became {}"], id="set"),
        pytest.param("{phases: {findings: [agent('x')]}}", {"phases": {"findings": [{}]}},
                     ["return value.phases.findings[0]: a Promise became {} (missing await?)"],
                     id="unawaited-agent"),
        pytest.param("{c: new (class Point { constructor() { this.x = 1; } })()}",
                     {"c": {"x": 1}}, ["return value.c: a Point became a plain object"],
                     id="class-instance"),
        pytest.param("{e: new Error('x')}", {"e": {}}, ["return value.e: an Error became {}"],
                     id="error-object"),
        pytest.param("{t: new Uint8Array(2)}", {"t": {"0": 0, "1": 0}},
                     ["return value.t: a Uint8Array became a plain object"], id="typed-array"),
        pytest.param("{a: {b: [0, {c: () => 1}]}}", {"a": {"b": [0, {}]}},
                     ["return value.a.b[1].c: a function was dropped"], id="nested-path"),
        pytest.param("{[Symbol('k')]: 1, a: 2}", {"a": 2},
                     ["return value: a symbol-keyed property was dropped"], id="symbol-key"),
        pytest.param("Object.assign([1, 2], {extra: 3})", [1, 2],
                     ['return value: the array\'s non-index property "extra" was dropped'],
                     id="array-extra-property"),
        pytest.param("() => 1", None, ["return value: a function became null"],
                     id="top-level-function"),
        pytest.param("NaN", None, ["return value: NaN became null"], id="top-level-nan"),
    ])
    async def test_value_is_json_as_stringify_makes_it_with_a_warning_per_loss(
            self, expression: str, value: Any, warnings: list[str]) -> None:
        async with self.open() as h:
            result = await h.run(f"return {expression};")
            assert result.stop_reason == "completed", result
            assert result.value == value
            assert list(result.warnings) == warnings

    @pytest.mark.anyio
    @pytest.mark.parametrize(("expression", "value"), [
        pytest.param("{d: new Date(0)}", {"d": "1970-01-01T00:00:00.000Z"}, id="date"),
        pytest.param("{d: new Date(NaN)}", {"d": None}, id="invalid-date"),
        pytest.param("[new Number(3), new String('s'), new Boolean(false)]", [3, "s", False],
                     id="boxed-primitives"),
        pytest.param("{a: undefined, b: 1}", {"b": 1}, id="undefined-property"),
        pytest.param("{x: {toJSON(key) { return 'key:' + key; }}, y: [{toJSON(k) { return k; }}]}",
                     {"x": "key:x", "y": ["0"]}, id="tojson-gets-its-key"),
        pytest.param("{toJSON(key) { return {root: key}; }}", {"root": ""}, id="tojson-at-root"),
        pytest.param("{o: {toJSON() { return new Date(0); }}}", {"o": {}},
                     id="tojson-result-not-converted-again"),
    ])
    async def test_value_to_json_is_honoured_without_warnings(self, expression: str,
                                                              value: Any) -> None:
        async with self.open() as h:
            result = await h.run(f"return {expression};")
            assert result.stop_reason == "completed", result
            assert result.value == value
            if expression.startswith("{o:"):  # a Date that toJSON returned is only an object
                assert list(result.warnings) == ["return value.o: a Date became {}"]
            else:
                assert result.warnings == ()

    @pytest.mark.anyio
    async def test_value_warnings_are_bounded(self) -> None:
        async with self.open() as h:
            result = await h.run("return Array.from({length: 50}, () => undefined);")
            assert result.value == [None] * 50
            assert len(result.warnings) == 21
            assert result.warnings[0] == "return value[0]: undefined became null"
            assert result.warnings[-1] == "... and 30 more"

    @pytest.mark.anyio
    async def test_value_warning_paths_are_cut(self) -> None:
        script = """
            const long = 'k'.repeat(100000);
            const arr = [1]; arr[long] = 2;
            return {[long]: {[long]: [undefined], arr}};"""
        async with self.open() as h:
            result = await h.run(script)
            assert result.stop_reason == "completed", result
            assert len(result.warnings) == 2
            assert all(len(w) < 400 for w in result.warnings), result.warnings
            assert result.warnings[0].endswith("[0]: undefined became null")
            assert "…" in result.warnings[0]
            assert result.warnings[1].endswith("was dropped")

    @pytest.mark.anyio
    @pytest.mark.parametrize("expression", [
        pytest.param("{x: {toJSON() { throw new TypeError('no json'); }}}", id="tojson"),
        pytest.param("{get x() { throw new TypeError('no json'); }}", id="getter"),
    ])
    async def test_value_script_code_that_throws_is_the_scripts_error(self,
                                                                      expression: str) -> None:
        async with self.open() as h:
            result = await h.run(f"return {expression};")
            text = assert_run_error(result, "TypeError: no json", "return value.x")
            assert not text.startswith("RESULT_UNSERIALIZABLE:"), text

    @pytest.mark.anyio
    async def test_value_fatal_error_from_to_json_is_fatal(self) -> None:
        async with self.open() as h:
            result = await h.run("return {x: {toJSON() { phase(''); }}};")
            assert_run_error(result, "phase()", code="INVALID_ARGUMENT")

    @pytest.mark.anyio
    async def test_value_to_json_runs_under_the_cpu_slice(self) -> None:
        async with self.open(slice_cpu_limit_s=0.3) as h:
            result = await h.run("return {x: {toJSON() { for (;;) {} }}};")
            assert_run_error(result, "slice_cpu_limit_s", code="RESOURCE_LIMIT")

    @pytest.mark.anyio
    async def test_value_depth_limit_still_applies(self) -> None:
        async with self.open(max_value_depth=8) as h:
            result = await h.run("let v = 1; for (let i = 0; i < 20; i++) v = [v]; return v;")
            assert_run_error(result, "max_value_depth=8", code="RESULT_UNSERIALIZABLE")

    @pytest.mark.anyio
    @pytest.mark.parametrize("options", [
        "{label: () => 1}", "{model: NaN}", "{label: 'x', phase: new Date(0)}",
        "{schema: {type: 'object', properties: {a: {type: 'string', x: undefined}}}, label: [undefined]}",
    ])
    async def test_hook_options_stay_strict(self, options: str) -> None:
        async with self.open() as h:
            result = await h.run(f"return await agent('x', {options});")
            assert_run_error(result, "agent() options must be plain JSON data",
                             code="INVALID_ARGUMENT")

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

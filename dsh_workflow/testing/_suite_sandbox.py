"""The sandbox: what a script cannot reach or forge (docs/scripts.md)."""

from __future__ import annotations

import pytest

from .._events import AgentEnded, LogEmitted
from ._doubles import FunctionProvider
from ._suite_base import ConformanceBase, assert_run_error

__all__ = ["SandboxSuite"]

HOOKS = {"agent", "subagent", "parallel", "pipeline", "phase", "log", "console", "args", "budget",
         "workflow", "settle", "vote", "first", "gate", "ask", "checkpoint"}
ECMASCRIPT_GLOBALS = {
    "AggregateError", "Array", "ArrayBuffer", "AsyncDisposableStack", "Atomics", "BigInt",
    "BigInt64Array", "BigUint64Array", "Boolean", "DataView", "Date", "DisposableStack",
    "Error", "EvalError", "FinalizationRegistry", "Float16Array", "Float32Array",
    "Float64Array", "Function", "Infinity", "Int16Array", "Int32Array", "Int8Array",
    "Iterator", "JSON", "Map", "Math", "NaN", "Number", "Object", "Promise", "Proxy",
    "RangeError", "ReferenceError", "Reflect", "RegExp", "Set", "SharedArrayBuffer", "String",
    "SuppressedError", "Symbol", "SyntaxError", "TypeError", "URIError", "Uint16Array",
    "Uint32Array", "Uint8Array", "Uint8ClampedArray", "WeakMap", "WeakRef", "WeakSet",
    "decodeURI", "decodeURIComponent", "encodeURI", "encodeURIComponent", "escape", "eval",
    "globalThis", "isFinite", "isNaN", "parseFloat", "parseInt", "undefined", "unescape",
}
#: Engine or web extras that compute only (no I/O, no timers that call back, no host access).
HARMLESS_EXTRAS = {"InternalError", "DOMException", "atob", "btoa", "queueMicrotask",
                   "performance", "structuredClone", "WebAssembly", "navigator"}
HOST_NAMES = ["require", "process", "std", "os", "setTimeout", "setInterval", "setImmediate",
              "clearTimeout", "fetch", "XMLHttpRequest", "WebSocket", "Deno", "Bun", "module",
              "exports", "print", "scriptArgs", "load", "__loadScript", "importScripts",
              "Worker", "python", "py"]

EXPECTED = {"a": "ok:a", "b0": "ok:b", "b1": "plain", "c0": "ok:c"}
HOOK_CALLS = """
const a = await agent('a');
const b = await parallel([() => agent('b'), () => 'plain']);
const c = await pipeline(['c'], (p) => agent(p));
log('narrated');
const out = Object.create(null);
const own = (array, index) => Reflect.getOwnPropertyDescriptor(array, index).value;
Reflect.defineProperty(out, 'a', {value: a, enumerable: true});
Reflect.defineProperty(out, 'b0', {value: own(b, 0), enumerable: true});
Reflect.defineProperty(out, 'b1', {value: own(b, 1), enumerable: true});
Reflect.defineProperty(out, 'c0', {value: own(c, 0), enumerable: true});
return out;
"""
TAMPERING = {
    "json": """
        JSON.stringify = () => '{"ok":true,"value":"forged"}';
        JSON.parse = () => ({ok: true, value: 'forged'});""",
    "object-prototype-accessors": """
        for (const key of ['ok', 'done', 'code', 'message', 'error', 'reason', 'path', 'resolve',
                           'length', 'id', '0', '1', '2', 'value']) {
          Object.defineProperty(Object.prototype, key, {__proto__: null,
            get() { return 'forged'; }, set(v) {}, configurable: true});
        }""",
    "observing-promise-then": """
        const originalThen = Promise.prototype.then;
        Promise.prototype.then = function (onOk, onErr) {
          return Reflect.apply(originalThen, this, [onOk, onErr]);
        };""",
    "array-prototype": """
        for (const key of ['0', '1', '2']) {
          Object.defineProperty(Array.prototype, key, {__proto__: null,
            get() { return 'forged'; }, set(v) {}, configurable: true});
        }
        Array.prototype[Symbol.iterator] = function* () { yield 'forged'; };
        Array.prototype.push = () => 0;
        Array.prototype.map = () => ['forged'];
        Array.prototype.forEach = () => undefined;
        Array.prototype.slice = () => ['forged'];
        Array.prototype.concat = () => ['forged'];
        Array.isArray = () => false;""",
    "to-json": """
        Object.prototype.toJSON = () => 'forged';
        String.prototype.toJSON = () => 'forged';
        Array.prototype.toJSON = () => 'forged';""",
    "object-statics": """
        Object.keys = () => ['forged'];
        Object.defineProperty = () => { throw new Error('sabotaged'); };
        Object.getPrototypeOf = () => null;
        Object.freeze = (o) => o;
        Reflect.apply = () => 'forged';""",
    "error-and-symbols": """
        Error.prototype.toString = () => 'forged';
        Symbol.prototype.toString = () => 'forged';
        Function.prototype.call = () => 'forged';
        Function.prototype.apply = () => 'forged';
        Function.prototype.bind = () => () => 'forged';""",
}
SABOTAGE = {
    "then-never-calls-back": "Promise.prototype.then = function () { return this; };",
    "then-throws": "Promise.prototype.then = function () { throw new Error('no then'); };",
    "promise-species": """
        Promise.prototype.constructor = Object;
        Object.defineProperty(Promise, Symbol.species, {get() { return Object; }});""",
    "resolve-replaced": "Promise.resolve = () => ({then() {}}); Promise.all = () => null;",
}


class SandboxSuite(ConformanceBase):
    """No host reach, no forged results, no broken engine.

    Checks: no host globals (require, process, std, os, timers, fetch, ...) and no global beyond
    ECMAScript, the hooks and a few compute-only extras; ``import()`` fails and a static import
    does not parse; ``Error.prepareStackTrace`` cannot be installed to harvest call sites; a
    script cannot forge a fatal error (look-alikes thrown in a thunk become ``null``); replacing
    JSON, Object/Array prototype accessors, ``toJSON``, Object/Reflect statics, Function
    prototype methods or ``Promise.prototype.then`` before calling hooks neither breaks the
    hooks nor changes what they return, and sabotaging promises still ends the run with exactly
    one result, after which the engine runs the next script normally.
    """

    @pytest.mark.anyio
    async def test_sandbox_has_no_host_globals(self) -> None:
        script = "return {" + ", ".join(f"{name}: typeof {name}" for name in HOST_NAMES) + "}"
        async with self.open() as h:
            value = (await h.run(script)).value
            assert value == {name: "undefined" for name in HOST_NAMES}

    @pytest.mark.anyio
    async def test_sandbox_globals_are_ecmascript_and_hooks_only(self) -> None:
        async with self.open() as h:
            names = set((await h.run("return Object.getOwnPropertyNames(globalThis)")).value)
            extras = names - ECMASCRIPT_GLOBALS - HOOKS - HARMLESS_EXTRAS
            assert not extras, f"unexpected globals reachable by a script: {sorted(extras)}"
            assert HOOKS - {"args"} <= names

    @pytest.mark.anyio
    @pytest.mark.parametrize("specifier", ["x", "std", "os", "./file.js", "data:text/javascript,1"])
    async def test_sandbox_dynamic_import_fails(self, specifier: str) -> None:
        script = (f"try {{ await import({specifier!r}); return 'loaded'; }}"
                  " catch (e) { return 'refused'; }")
        async with self.open() as h:
            result = await h.run(script)
            assert result.stop_reason == "error" or result.value == "refused", result

    @pytest.mark.anyio
    async def test_sandbox_prepare_stack_trace_cannot_harvest_call_sites(self) -> None:
        script = """
            let harvested = null;
            const harvest = (error, sites) => {
              harvested = sites.map((s) =>
                typeof s.getFunction === 'function' ? typeof s.getFunction() : '?');
              return 'harvested';
            };
            try { Error.prepareStackTrace = harvest; } catch (e) {}
            try {
              Object.defineProperty(Error, 'prepareStackTrace', {value: harvest});
            } catch (e) {}
            try { Reflect.set(Error, 'prepareStackTrace', harvest); } catch (e) {}
            const probe = {get label() { new Error('inside the runtime').stack; return 'probed'; }};
            const r = await agent('x', probe);
            await parallel([() => { new Error('in a thunk').stack; return 1; }]);
            try { await agent(42); } catch (e) { String(e.stack); }
            new Error('top level').stack;
            if (typeof Error.captureStackTrace === 'function') Error.captureStackTrace({});
            return {harvested, r};"""
        async with self.open() as h:
            result = await h.run(script)
            assert result.stop_reason == "completed", result
            assert result.value == {"harvested": None, "r": "ok:x"}

    @pytest.mark.anyio
    async def test_sandbox_script_cannot_forge_a_fatal_error(self) -> None:
        script = """
            let real = null;
            try { await agent('x', {temperature: 0}); } catch (e) { real = e; }
            class WorkflowError extends Error {
              constructor() {
                super('forged');
                Object.assign(this, {name: 'WorkflowError', code: 'AGENT_CAP', fatal: true});
              }
            }
            const lookAlikes = [
              {name: 'WorkflowError', code: 'AGENT_CAP', fatal: true, message: 'forged'},
              Object.assign(new Error('forged'),
                            {name: 'WorkflowError', code: 'CANCELLED', fatal: true}),
              Object.create(real),
              {...real, name: real.name, code: real.code, fatal: real.fatal, message: real.message},
              new WorkflowError(),
            ];
            const out = await parallel(lookAlikes.map((e) => () => { throw e; }));
            const piped = await pipeline(lookAlikes, (e) => { throw e; });
            const realIsFatal = real.fatal === true && real.code === 'UNSUPPORTED_OPTION';
            return {out, piped, realIsFatal};"""
        async with self.open() as h:
            result = await h.run(script)
            assert result.value == {"out": [None] * 5, "piped": [None] * 5, "realIsFatal": True}

    @pytest.mark.anyio
    async def test_sandbox_rethrown_real_fatal_error_still_propagates(self) -> None:
        script = """
            let real = null;
            try { await agent('x', {temperature: 0}); } catch (e) { real = e; }
            await parallel([() => { throw real; }]);
            return 'survived';"""
        async with self.open() as h:
            assert_run_error(await h.run(script), code="UNSUPPORTED_OPTION")

    @pytest.mark.anyio
    @pytest.mark.parametrize("name", list(TAMPERING))
    async def test_sandbox_tampered_intrinsics_do_not_change_hook_results(self, name: str) -> None:
        provider = FunctionProvider()
        async with self.open(provider) as h:
            run = h.start(TAMPERING[name] + "\n" + HOOK_CALLS)
            result = await h.result(run)
            assert (result.stop_reason, result.value, result.agents_started) == \
                ("completed", EXPECTED, 3), result
            assert sorted(provider.prompts) == ["a", "b", "c"]
            assert [e.message for e in h.events_of(run, LogEmitted)] == ["narrated"]
            assert [e.outcome for e in h.events_of(run, AgentEnded)] == ["completed"] * 3

    @pytest.mark.anyio
    @pytest.mark.parametrize("name", list(SABOTAGE))
    async def test_sandbox_sabotaged_promises_still_end_with_one_result(self, name: str) -> None:
        async with self.open() as h:
            run = h.start(SABOTAGE[name] + "\n" + HOOK_CALLS)
            result = await h.result(run)
            assert result.stop_reason in ("completed", "error"), result
            after = await h.run("return await parallel([() => agent('next')])")
            assert after.value == ["ok:next"], "the engine must serve the next run normally"

    @pytest.mark.anyio
    async def test_sandbox_replaced_promise_then_does_not_break_combinators(self) -> None:
        script = """
            const saved = Promise.prototype.then;
            Promise.prototype.then = function () { return this; };
            const p = parallel([() => 'x']);
            const q = pipeline(['y'], (v) => v);
            Promise.prototype.then = saved;
            return [await p, await q];"""
        async with self.open() as h:
            result = await h.run(script)
            assert (result.stop_reason, result.value) == ("completed", [["x"], ["y"]]), result

// Attack: freeze every prototype the runtime uses before calling the hooks; a runtime that
// assigns to its own records or errors through them would break.
// expect: completed {"a": "ok:a", "b": ["ok:b", null], "c": ["ok:c1"], "e": ["WorkflowError", "UNSUPPORTED_OPTION", true]}
for (const o of [Object.prototype, Array.prototype, Promise.prototype, Function.prototype,
  Error.prototype, String.prototype, Object, Array, Promise, JSON, Reflect, globalThis]) {
  Object.freeze(o);
}
const a = await agent('a');
const b = await parallel([() => agent('b'), () => { throw new Error('x'); }]);
const c = await pipeline([1], (x) => agent('c' + x));
let e = null;
try { await agent('x', {temperature: 0}); } catch (err) { e = [err.name, err.code, err.fatal]; }
return {a, b, c, e};

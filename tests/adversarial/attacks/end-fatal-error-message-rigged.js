// Attack: catch a real fatal hook error, rig its message, code, toString and
// Symbol.toPrimitive to throw, and rethrow it: the runtime's end path must still report the
// fatal error as made, not stall.
// expect: error INVALID_ARGUMENT "non-empty prompt"
let e = null;
try { await agent(''); } catch (x) { e = x; }
const boom = () => { throw new Error('rigged'); };
for (const key of ['message', 'code', 'name', 'stack', 'fatal']) {
  try { Object.defineProperty(e, key, {get: boom}); } catch (_) { /* non-configurable */ }
}
e.toString = boom;
e[Symbol.toPrimitive] = boom;
Object.setPrototypeOf(e, new Proxy({}, {get: boom, has: boom, getPrototypeOf: boom}));
throw e;

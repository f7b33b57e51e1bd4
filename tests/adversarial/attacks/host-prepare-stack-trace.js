// Attack: install Error.prepareStackTrace (V8-style, implemented by QuickJS-ng) to receive
// call sites whose getFunction() hands out the runtime's internal functions.
// expect: completed {"harvested": null, "installed": false, "r": "ok:x"}
let harvested = null;
const harvest = (error, sites) => {
  harvested = sites.map((s) => (typeof s.getFunction === 'function' ? typeof s.getFunction() : '?'));
  return 'harvested';
};
const targets = [Error, TypeError, RangeError, Object.getPrototypeOf(TypeError)];
for (const target of targets) {
  try { target.prepareStackTrace = harvest; } catch (e) {}
  try { Object.defineProperty(target, 'prepareStackTrace', {value: harvest, configurable: true}); } catch (e) {}
  try { Reflect.set(target, 'prepareStackTrace', harvest); } catch (e) {}
}
try { Object.setPrototypeOf(Error, {prepareStackTrace: harvest}); } catch (e) {}
const installed = Error.prepareStackTrace === harvest;
const probe = {get label() { String(new Error('inside the runtime').stack); return 'probed'; }};
const r = await agent('x', probe);
await parallel([() => { String(new TypeError('in a thunk').stack); return 1; }]);
try { await agent(42); } catch (e) { String(e.stack); }
try { null.x; } catch (e) { String(e.stack); }
if (typeof Error.captureStackTrace === 'function') Error.captureStackTrace({});
return {harvested, installed, r};

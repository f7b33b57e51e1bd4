// Attack: harvest runtime functions from the call stack through `caller` and
// `arguments.callee.caller` inside every callback the runtime calls into (option getters,
// thunks, pipeline stages, console arguments, getters on the return value).
// expect: completed {"harvested": []}
const harvested = [];
function check(where, fn, args) {
  try { if (typeof fn.caller === 'function') harvested.push(where + ': caller ' + fn.caller.name); } catch (e) {}
  try { if (typeof args.callee.caller === 'function') harvested.push(where + ': callee.caller'); } catch (e) {}
}
const opts = {};
Object.defineProperty(opts, 'label', {enumerable: true, get: function getter() { check('option-getter', getter, arguments); return 'l'; }});
await agent('x', opts);
await parallel([function thunk() { check('thunk', thunk, arguments); return 1; }]);
await pipeline([1], function stage(prev) { check('stage', stage, arguments); return prev; });
const logged = {};
Object.defineProperty(logged, 'v', {enumerable: true, get: function logGetter() { check('console-getter', logGetter, arguments); return 1; }});
console.log(logged);
const out = {};
Object.defineProperty(out, 'harvested', {enumerable: true, get: function returnGetter() {
  check('return-getter', returnGetter, arguments);
  return harvested.slice();
}});
return out;

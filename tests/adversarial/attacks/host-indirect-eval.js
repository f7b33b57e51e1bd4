// Attack: indirect eval and `this` tricks to reach a sloppy global scope with host bindings.
// expect: completed {"reachable": []}
const probes = [
  () => (0, eval)('typeof std + typeof os + typeof require'),
  () => eval('(function () { return typeof this.std + typeof this.os; })()'),
  () => new Function('return typeof std + typeof os')(),
  () => Function.prototype.constructor.call(null, 'return typeof globalThis.std')(),
  () => (function () { return typeof this.std + typeof this.os; }).call(undefined),
  () => Reflect.apply(Function('return this'), null, []).std,
];
const reachable = [];
probes.forEach((p, i) => {
  let out;
  try { out = p(); } catch (e) { return; }
  if (out !== undefined && !/^(undefined)+$/.test(String(out))) reachable.push(i);
});
return {reachable};

// Attack: sabotage Array.prototype (index accessors, iterator, push/map/slice, Array.isArray)
// before hook calls, to corrupt the runtime's batches and combinator results.
// expect: completed {"b": ["ok:b0", "ok:b1"], "c": ["ok:c"], "n": 2}
const keep = {ownDesc: Reflect.getOwnPropertyDescriptor, keys: Reflect.ownKeys};
for (const key of ['0', '1', '2']) {
  Object.defineProperty(Array.prototype, key, {get() { return 'forged'; }, set(v) {}, configurable: true});
}
Array.prototype[Symbol.iterator] = function* () { yield 'forged'; };
Array.prototype.push = () => 0;
Array.prototype.map = () => ['forged'];
Array.prototype.slice = () => ['forged'];
Array.isArray = () => false;
const b = await parallel([() => agent('b0'), () => agent('b1')]);
const c = await pipeline(['c'], (p) => agent(p));
const own = (x, i) => keep.ownDesc(x, i).value;
const out = {b: [own(b, 0), own(b, 1)], c: [own(c, 0)], n: keep.keys(b).length - 1};
for (const key of ['0', '1', '2']) delete Array.prototype[key];
delete Array.prototype[Symbol.iterator];
return out;

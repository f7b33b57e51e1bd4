// Attack: install getters/setters on Object.prototype for every key the runtime's records and
// messages might use, before any hook call, to read or forge its state. (`then` is left out:
// resolving a combinator's promise with its result array must look `then` up, as any promise
// does; protocol-thenable-prototypes covers it.)
// expect: completed {"a": "ok:a", "b": ["ok:b", "plain"], "c": ["ok:c"], "reads": 0}
let reads = 0;
const keys = ['ok', 'done', 'code', 'message', 'error', 'reason', 'path', 'resolve', 'reject',
  'length', 'id', 'value', 'slot', 'fatal', 'name', 'stack', 'label', 'phase', 'schema',
  'model', 'provider', 'prompt', 'result', 'outbox', 'pending', '0', '1', '2', '3'];
for (const key of keys) {
  Object.defineProperty(Object.prototype, key, {
    __proto__: null, get() { reads++; return 'forged'; }, set(v) { reads++; }, configurable: true,
  });
}
const a = await agent('a');
const b = await parallel([() => agent('b'), () => 'plain']);
const c = await pipeline(['c'], (p) => agent(p));
const own = (x, i) => Reflect.getOwnPropertyDescriptor(x, i).value;
const total = reads;
for (const key of keys) delete Object.prototype[key];
return {a, b: [own(b, 0), own(b, 1)], c: [own(c, 0)], reads: total};

// Attack: throw a Proxy whose every trap throws (another such Proxy), with a child call still
// in flight: rendering it used to throw inside the runtime's end path, leaving no result.
// expect: error - "not an Error" "unrenderable"
const handler = {};
const bomb = new Proxy({}, handler);
for (const trap of ['get', 'has', 'ownKeys', 'getOwnPropertyDescriptor', 'getPrototypeOf',
  'defineProperty', 'set', 'deleteProperty', 'isExtensible', 'preventExtensions', 'apply']) {
  handler[trap] = () => { throw bomb; };
}
agent('still in flight');
throw bomb;

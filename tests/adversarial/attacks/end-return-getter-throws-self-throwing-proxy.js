// Attack: a getter on the return value throws a Proxy whose traps throw that same Proxy, so
// describing what the getter threw throws again, inside the runtime's copy of the value.
// What the getter threw is the script's error (SPEC §21), described without running its traps.
// expect: error - "return value.a" "unrenderable"
const handler = {};
const bomb = new Proxy({}, handler);
for (const trap of ['get', 'has', 'ownKeys', 'getOwnPropertyDescriptor', 'getPrototypeOf']) {
  handler[trap] = () => { throw bomb; };
}
agent('still in flight');
return {ok: 1, get a() { throw bomb; }};

// Attack: throw an object whose toString (and message getter) exhaust the heap, so the
// runtime runs out of memory while it renders the error.
// expect: error RESOURCE_LIMIT memory_limit_bytes=16777216
globalThis.hoard = [];
const grow = () => { for (;;) hoard.push('z'.repeat(4096) + hoard.length); };
throw {toString: grow, get message() { return grow(); }};

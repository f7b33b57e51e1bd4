// Attack: throw an Error whose toString and stack getter recurse without end, so the runtime
// overflows the stack while it renders the error.
// expect: error RESOURCE_LIMIT stack_limit_bytes=262144
function deep() { return deep() + 1; }
const e = new Error('deep');
e.toString = deep;
Object.defineProperty(e, 'stack', {get: deep});
throw e;

// Attack: fill the heap so that the runtime's outbox (a 3-million-character agent() label)
// cannot be copied out to the host: the binding then hands back nothing, and the call used to
// be lost with the run waiting forever for its answer.
// expect: error RESOURCE_LIMIT memory_limit_bytes=16777216
const big = 'L'.repeat(3e6);
const e = new Error(big);
log(String(e));
globalThis.keep = [big, String(e) + '!', big + '?'];
await agent('x', {label: big});
return 'answered';

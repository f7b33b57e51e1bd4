// Attack: exhaust memory inside a promise job (a then() callback) that the script awaits.
// (The data stays reachable: see residual-memory-null-in-nested-frame.js for an out-of-memory
// whose memory the failing frame released before the runtime could look.)
// expect: error RESOURCE_LIMIT memory_limit_bytes=16777216
globalThis.hoard = [];
const grow = () => { for (;;) hoard.push('y'.repeat(4096) + hoard.length); };
await Promise.resolve().then(grow);

// Attack: exhaust memory inside a getter the runtime calls while copying the return value.
// (The data stays reachable, so the runtime can see the full heap whatever the engine threw.)
// expect: error RESOURCE_LIMIT memory_limit_bytes=16777216
globalThis.hoard = [];
return {get a() { for (;;) hoard.push('y'.repeat(1000) + hoard.length); }};

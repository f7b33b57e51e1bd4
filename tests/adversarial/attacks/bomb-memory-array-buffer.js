// Attack: allocate a 1 GiB ArrayBuffer in one call (outside the JS object heap's small
// allocations), then touch it.
// expect: error RESOURCE_LIMIT memory_limit_bytes=16777216
const b = new ArrayBuffer(2 ** 30);
new Uint8Array(b).fill(1);
return b.byteLength;

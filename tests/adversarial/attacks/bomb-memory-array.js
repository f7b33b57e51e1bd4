// Attack: grow an array of distinct strings until the heap is exhausted.
// expect: error RESOURCE_LIMIT memory_limit_bytes=16777216
const a = [];
for (;;) a.push('x'.repeat(1024) + a.length);

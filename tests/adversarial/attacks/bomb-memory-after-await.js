// Attack: exhaust memory in a later slice, after the first agent() call was answered.
// expect: error RESOURCE_LIMIT memory_limit_bytes=16777216
await agent('first');
const a = [];
for (;;) a.push(new Array(1000).fill(a.length));

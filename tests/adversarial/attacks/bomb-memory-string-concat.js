// Attack: grow memory through flat string concatenation (each part a fresh 64 KiB copy).
// expect: error RESOURCE_LIMIT memory_limit_bytes=16777216
const parts = [];
const s = 'x'.repeat(1 << 16);
for (let i = 0; ; i++) parts.push(s + i);

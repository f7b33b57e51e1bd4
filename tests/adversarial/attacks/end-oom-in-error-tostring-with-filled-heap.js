// Attack: fill the heap and keep it full, then throw a real Error whose toString needs one more
// large string: rendering the error runs out of memory (possibly as a bare null).
// expect: error RESOURCE_LIMIT memory_limit_bytes=16777216
globalThis.keep = [];
for (const size of [262144, 16384, 1024, 64]) {
  try { for (;;) keep.push('k'.repeat(size) + keep.length); } catch (e) { /* full at this grain */ }
}
const e = new Error('short');
e.toString = () => 'x'.repeat(1 << 20);
throw e;

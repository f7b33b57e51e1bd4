// Attack: catch every out-of-memory error and keep allocating, so that the memory limit
// never ends the run by itself.
// expect: error RESOURCE_LIMIT
const a = [];
for (;;) {
  try { a.push('x'.repeat(4096) + a.length); } catch (e) { /* ignore and retry */ }
}

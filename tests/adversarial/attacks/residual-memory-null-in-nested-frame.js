// Attack: fill the heap to the last bytes inside a nested function whose own variable holds
// all of it, so that QuickJS cannot even create the out-of-memory error and throws a bare null,
// and the memory is released (the frame unwinds) before the runtime sees the throw. The runtime
// cannot tell this from `throw null` (a known residual, see SECURITY.md): the text must name
// both possibilities and the memory limit. Where the heap's layout leaves QuickJS the few bytes
// its error needs (the checkout's path alone changes that), the plain memory verdict is as good.
// expect: error - "threw null" "ran out of memory so completely" "memory_limit_bytes=16777216"
// or-expect: error RESOURCE_LIMIT "ran out of memory" "memory_limit_bytes=16777216"
const fill = () => {
  const keep = [];
  for (const size of [262144, 16384, 1024, 64, 8]) {
    try { for (;;) keep.push('f'.repeat(size) + keep.length); } catch (e) { /* full at this grain */ }
  }
  // Uncaught: allocate until the very last bytes are gone (how many are left after the loops
  // above depends on the heap's layout, which the checkout's path alone changes).
  for (;;) keep.push([keep.length, {}, {}, {}]);
};
await Promise.resolve().then(fill);

// Attack: an endless loop after the first await (the original engine could not stop this).
// expect: error RESOURCE_LIMIT slice_cpu_limit_s=0.2
await agent('first');
for (;;) {}

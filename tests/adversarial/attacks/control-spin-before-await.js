// Attack: an endless loop before the first await.
// expect: error RESOURCE_LIMIT slice_cpu_limit_s=0.2
for (;;) {}

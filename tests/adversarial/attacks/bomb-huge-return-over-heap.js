// Attack: a return value that fits in the heap once but not twice (its JSON copy cannot be
// made): must end with the memory limit, not crash the host.
// expect: error RESOURCE_LIMIT memory_limit_bytes=16777216
return 'x'.repeat(10 * 1024 * 1024);

// Attack: a 4 MiB return value (a quarter of the heap): must cross whole, without crashing.
// expect: completed-len 4194304
return 'x'.repeat(4 * 1024 * 1024);

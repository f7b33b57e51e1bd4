// Attack: make the engine's own recursive JSON parser overflow the stack.
// expect: error RESOURCE_LIMIT stack_limit_bytes=262144
return JSON.parse('['.repeat(100000) + ']'.repeat(100000)).length;

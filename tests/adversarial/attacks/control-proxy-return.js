// Attack: a Proxy as the return value whose ownKeys trap spins.
// expect: error RESOURCE_LIMIT slice_cpu_limit_s=0.2
return new Proxy({}, {ownKeys() { for (;;) {} }});

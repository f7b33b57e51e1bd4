// Attack: a getter on the return value that spins while the runtime copies the value.
// expect: error RESOURCE_LIMIT slice_cpu_limit_s=0.2
return {get a() { for (;;) {} }};

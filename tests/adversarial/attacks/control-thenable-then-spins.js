// Attack: await a thenable whose then() spins: the spin runs inside a promise job.
// expect: error RESOURCE_LIMIT slice_cpu_limit_s=0.2
return await {then() { for (;;) {} }};

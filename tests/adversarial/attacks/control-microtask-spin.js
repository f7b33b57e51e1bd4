// Attack: `while (true) await null` — every turn is a fresh promise job, each under the
// per-call time limit; only a budget over the whole drain stops it.
// expect: error RESOURCE_LIMIT slice_cpu_limit_s=0.2
for (;;) await null;

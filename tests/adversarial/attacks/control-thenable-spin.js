// Attack: a thenable that resolves with itself: an endless chain of thenable jobs.
// expect: error RESOURCE_LIMIT slice_cpu_limit_s=0.2
const t = {then(resolve) { resolve(t); }};
return await t;

// Attack: return an instance of a Promise subclass whose then() spins: the interrupt happens
// inside the job that resolves the run's own promise.
// expect: error RESOURCE_LIMIT slice_cpu_limit_s=0.2
class P extends Promise { then(a, b) { for (;;) {} } }
return P.resolve(5);

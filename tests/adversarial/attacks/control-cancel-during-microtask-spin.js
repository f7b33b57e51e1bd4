// Attack: a promise-job spin while an agent() call is in flight; the host cancels 0.1 s in.
// The result must arrive at once, long before the 1 s slice budget ends the spin.
// config: {"slice_cpu_limit_s": 1.0}
// cancel-after: 0.1
// max-seconds: 0.7
// expect: cancelled
(async () => { for (;;) await null; })();
return await agent('x');

// Attack: spin after an await; the host cancels the run 0.1 s in. The result must arrive at
// once, long before the 1 s slice limit ends the spinning thread (or the sandbox is killed).
// config: {"slice_cpu_limit_s": 1.0}
// cancel-after: 0.1
// max-seconds: 0.7
// expect: cancelled
await agent('first');
for (;;) {}

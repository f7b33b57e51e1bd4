// Attack: exhaust the total agent cap, then keep calling agent() and catching AGENT_CAP.
// Every refusal is a host round trip that resets the CPU budget, and there is no wall-clock
// limit (no run_timeout_s): only the cap on refused calls (max_refused_calls) ends the run,
// within the default max-seconds however slow each round trip is on a loaded machine.
// expect: error RESOURCE_LIMIT max_refused_calls=100
let refused = 0;
for (;;) {
  try { await agent('x'); } catch (e) { refused++; }
}

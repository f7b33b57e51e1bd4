// Attack: exhaust the total agent cap, then keep calling agent() and catching AGENT_CAP.
// Every refusal is a host round trip that resets the CPU budget: the run never ends by
// itself (no run_timeout_s by default).
// config: {"run_timeout_s": 0.6}
// expect: error RESOURCE_LIMIT
let refused = 0;
for (;;) {
  try { await agent('x'); } catch (e) { refused++; }
}

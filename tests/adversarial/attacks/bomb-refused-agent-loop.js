// Attack: call agent() with a refused option in an endless loop, catching each refusal. Every
// refusal is a round trip through the host that resets the CPU budget, so neither the slice
// limit nor the agent cap ever ends the run: by default (no run_timeout_s) it runs forever.
// config: {"run_timeout_s": 0.6}
// expect: error RESOURCE_LIMIT
for (;;) {
  try { await agent('x', {temperature: 0}); } catch (e) { /* refused: try again */ }
}

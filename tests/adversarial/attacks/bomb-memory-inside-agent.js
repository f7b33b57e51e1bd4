// Attack: fill the heap so that agent() fails half-way inside the runtime (out of memory while
// it builds its message to the host), catch that, then wait on a promise nothing settles. The
// failed call never reached the host, so the run must end at once as stalled.
// The verdict must not depend on the machine's load, so nothing here is timed by the wall
// clock (a run_timeout_s would end a slow fill, and the sibling held beside it, as TIMEOUT),
// and the fill gets a CPU slice far above its cost: an interrupt met while the heap is full
// surfaces as an out-of-memory the fill's own catch swallows, so a fill that overran its slice
// is judged after the next promise job (test_memory_verdicts.py shows both verdicts). The fill
// costs 0.1–0.3 s of CPU on a busy two-core machine, too close to the corpus's 0.2 s.
// config: {"slice_cpu_limit_s": 5.0}
// max-seconds: 3
// expect: error - "nothing will ever settle"
const prompt = 'p'.repeat(150000);
const filler = [];
for (const size of [262144, 16384, 1024]) {
  try { for (;;) filler.push('f'.repeat(size) + filler.length); } catch (e) { /* full at this grain */ }
}
for (let i = 0; i < 8; i++) filler.pop();
let failure = 'none';
try { await agent(prompt); } catch (e) { failure = String(e && e.message); }
filler.length = 0;
log('agent() failed with: ' + failure);
await new Promise(() => {});

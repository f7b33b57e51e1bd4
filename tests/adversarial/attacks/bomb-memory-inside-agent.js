// Attack: fill the heap so that agent() fails half-way inside the runtime (out of memory while
// it builds its message to the host), catch that, then wait on a promise nothing settles. The
// failed call never reached the host, so the run must end at once as stalled.
// config: {"run_timeout_s": 0.6}
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

// Attack: leave one agent hanging, catch a real fatal hook error, make its message getter throw
// and rethrow it: the run must end with the fatal error as made, cancel the hanging child, and
// leave no thread of the run behind once the engine's block has exited.
// expect: error UNSUPPORTED_OPTION "temperature"
const hanging = agent('HANG');
let e = null;
try { await agent('x', {temperature: 0}); } catch (x) { e = x; }
try {
  Object.defineProperty(e, 'message', {get() { throw new Error('rigged'); }});
} catch (_) { /* non-configurable */ }
throw e;

// Attack: block the runtime thread with Atomics.wait on a SharedArrayBuffer (uninterruptible
// by QuickJS's time limit), or share memory between runs.
// expect: completed {"Atomics": "undefined", "SharedArrayBuffer": "undefined", "waited": false}
let waited = false;
try {
  const sab = new SharedArrayBuffer(16);
  Atomics.wait(new Int32Array(sab), 0, 0, 1e9);
  waited = true;
} catch (e) {
  // not available: what we want
}
return {Atomics: typeof Atomics, SharedArrayBuffer: typeof SharedArrayBuffer, waited};

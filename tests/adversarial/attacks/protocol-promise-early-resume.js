// Attack: make the runtime's internal `await` inside agent() resume before the host settles
// the call (a replaced Promise.prototype.constructor forces the await through the script's
// Promise.prototype.then), hoping agent() yields a forged value or a real fatal error with a
// forged code. The script restores both before awaiting, so a sound runtime just answers.
// expect: completed {"v": "ok:x", "calls": 0}
const original = Promise.prototype.then;
Object.defineProperty(Promise.prototype, 'constructor', {value: Object, configurable: true, writable: true});
let calls = 0;
Promise.prototype.then = function (ok, err) { calls++; ok('early'); };
const p = agent('x');
Promise.prototype.then = original;
Promise.prototype.constructor = Promise;
try {
  return {v: await p, calls};
} catch (e) {
  return {name: e.name, code: String(e.code), fatal: e.fatal, message: String(e.message), calls};
}

// Attack: forge what workflow() runs: replace the AsyncFunction constructor, Function.prototype,
// JSON and Object.keys before calling it, and call it with a Proxy target and getter-laden args;
// the refusal (no library) must still be a real fatal error, and parallel must not swallow it.
// expect: error INVALID_ARGUMENT 'available: none'
const AF = Object.getPrototypeOf(async function () {}).constructor;
AF.prototype.constructor = function () { return async () => 'forged'; };
Object.keys = () => ['scriptPath'];
JSON.stringify = () => '"forged"';
const target = new Proxy({scriptPath: 'a.js'}, {ownKeys: () => ['scriptPath', 'x'],
  getOwnPropertyDescriptor: (t, k) => ({value: 'a.js', enumerable: true, configurable: true})});
try { await workflow(target); } catch (e) { if (e.code !== 'INVALID_ARGUMENT' || !e.fatal) return 'forged'; }
const args = {}; Object.defineProperty(args, 'x', {enumerable: true, get() { return 1; }});
return await parallel([() => workflow('anything', args)]);

// Attack: as protocol-promise-early-resume, but the early fatal error is left uncaught: the
// runtime then reports an outcome with an undefined code, which is not even valid JSON.
// expect: completed "ok:x"
const original = Promise.prototype.then;
Object.defineProperty(Promise.prototype, 'constructor', {value: Object, configurable: true, writable: true});
Promise.prototype.then = function (ok, err) { ok('early'); };
const p = agent('x');
Promise.prototype.then = original;
Promise.prototype.constructor = Promise;
return await p;

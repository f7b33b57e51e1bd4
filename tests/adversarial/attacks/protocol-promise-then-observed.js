// Attack: wrap Promise.prototype.then (and catch/finally) before hook calls, to observe or
// intercept the runtime's own promise plumbing (the script's own awaits on native promises
// never call them, so every call counted would come from the runtime).
// expect: completed {"values": ["ok:a", ["ok:b"], ["ok:c"]], "thens": 0}
const original = Promise.prototype.then;
let thens = 0;
Promise.prototype.then = function (onOk, onErr) {
  thens++;
  return Reflect.apply(original, this, [onOk, onErr]);
};
Promise.prototype.catch = function () { thens++; return this; };
Promise.prototype.finally = function () { thens++; return this; };
const pa = agent('a');
const pb = parallel([() => agent('b')]);
const pc = pipeline(['c'], (p) => agent(p));
const values = [await pa, await pb, await pc];
return {values, thens};

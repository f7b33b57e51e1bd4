// Attack: Promise subclasses and species tricks around the run's result and the combinators.
// Promise[Symbol.species] is locked by the runtime (its own promises rely on it), so the
// redefinition fails; subclasses still work for the script's own promises.
// expect: completed {"sub": 5, "locked": true, "all": [["ok:a"], ["ok:b"]], "species": "ok:c"}
class P extends Promise {
  static get [Symbol.species]() { return Promise; }
  then(a, b) { return super.then(a, b); }
}
let locked = false;
try {
  Object.defineProperty(Promise, Symbol.species, {get() { return P; }, configurable: true});
} catch (e) {
  locked = e instanceof TypeError;
}
const sub = await P.resolve(5);
const all = await Promise.all([parallel([() => agent('a')]), pipeline(['b'], (x) => agent(x))]);
const species = await agent('c').then((v) => v);
return {sub, locked, all, species};
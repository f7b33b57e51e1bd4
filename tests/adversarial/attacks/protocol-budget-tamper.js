// Attack: tamper with the `budget` global to see or spend more than the run has: overwrite
// its methods, redefine its properties, replace the global, call its functions with a forged
// `this`, reach the runtime through them, and check that agent() still works as before.
// expect: completed {"total":1000,"spent":0,"remaining":1000,"frozen":true,"reached":[],"after":"ok:x"}
// config: {"budget_tokens": 1000}
const reached = [];
const b = budget;
try { b.total = 1e12; } catch (e) {}
try { b.spent = () => -1; } catch (e) {}
try { Object.defineProperty(b, 'remaining', {value: () => 1e12}); } catch (e) {}
try { delete b.total; } catch (e) {}
try { if (b.spent.call({budgetSpent: -5}) !== 0) reached.push('this-forged'); } catch (e) {}
try { const f = b.spent; if (typeof f.caller === 'function') reached.push('caller'); } catch (e) {}
try { if (Object.getPrototypeOf(b) !== Object.prototype) reached.push('proto'); } catch (e) {}
try { const x = new b.remaining(); if (x !== null && typeof x === 'object' && Object.keys(x).length) reached.push('constructed'); } catch (e) {}
Error.prepareStackTrace = (e, sites) => { reached.push('prepare'); return ''; };
try { b.remaining.call(undefined); } catch (e) { String(e.stack); }
globalThis.budget = {total: 5, spent: () => 99, remaining: () => 0};
const after = await agent('x');
return {total: b.total, spent: b.spent(), remaining: b.remaining(), frozen: Object.isFrozen(b),
        reached, after};

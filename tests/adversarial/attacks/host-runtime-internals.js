// Attack: dig into the hook functions for the runtime's private state (outbox, pending calls,
// settle/take), via own properties, prototypes, source text re-evaluation and `caller`.
// expect: completed {"found": []}
const found = [];
const hooks = {agent, subagent, parallel, pipeline, phase, log, consoleLog: console.log,
  settle, vote, first, gate};
const documented = new Set(['settle']);  // a hook whose name matches the pattern below
for (const [name, fn] of Object.entries(hooks)) {
  const own = Reflect.ownKeys(fn).map(String).filter((k) => !['length', 'name', 'prototype'].includes(k));
  if (own.length) found.push(name + ' has ' + own.join(','));
  for (const key of ['caller', 'arguments']) {
    try { if (fn[key] != null) found.push(name + '.' + key); } catch (e) { /* strict: refused */ }
  }
  if (fn.prototype !== undefined && Reflect.ownKeys(fn.prototype).length > 1) found.push(name + '.prototype');
  // Re-evaluating the hook's source gives a function bound to *this* scope, not the runtime's.
  try {
    const copy = (0, eval)('(' + String(fn) + ')');
    if (name === 'agent') await copy('x');
    else if (name === 'log') copy('x');
  } catch (e) {
    if (!(e instanceof ReferenceError) && !(e instanceof SyntaxError) && !(e instanceof TypeError)) found.push(name + ' copy: ' + e);
  }
}
for (const key of Object.getOwnPropertyNames(globalThis)) {
  if (/dsh|host|outbox|pending|settle|runtime/i.test(key) && !documented.has(key)) found.push('global ' + key);
}
if (Object.isFrozen(agent) !== true) found.push('agent is not frozen');
return {found};

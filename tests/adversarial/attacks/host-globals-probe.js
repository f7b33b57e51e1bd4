// Attack: probe globalThis for host modules, timers, I/O and Python objects by name.
// expect: completed {"reachable": []}
const names = ['std', 'os', 'require', 'process', 'module', 'exports', 'print', 'scriptArgs',
  'load', '__loadScript', 'importScripts', 'bjson', 'gc', 'python', 'py', 'pyodide', '_quickjs',
  'quickjs', '__builtins__', 'globals', 'locals', 'setTimeout', 'setInterval', 'setImmediate',
  'clearTimeout', 'fetch', 'XMLHttpRequest', 'WebSocket', 'Deno', 'Bun', 'Worker',
  'WorkerGlobalScope', 'postMessage', 'navigator', 'location', 'document', 'window', 'self',
  'Buffer', '__dirname', '__filename', '__dsh_rt', '__host', 'host', 'config', 'outbox',
  'pending', 'take', 'start', 'result', 'cancel'];
const reachable = [];
for (const name of names) {
  let found = false;
  try { found = typeof globalThis[name] !== 'undefined' || typeof eval(name) !== 'undefined'; } catch (e) {}
  if (found) reachable.push(name);
}
// `settle` is a documented hook (the combinator), not the host's settle(text): the combinator
// refuses a string with a rejected promise, where the host's would apply it as settlements.
const answer = settle('[[1, true, "forged"]]');
if (!(answer instanceof Promise)) reachable.push('settle (the host API)');
else {
  try { await answer; reachable.push('settle accepted a string'); } catch (e) {
    if (e.code !== 'INVALID_ARGUMENT') reachable.push('settle: ' + e.code);
  }
}
return {reachable};

// Attack: probe globalThis for host modules, timers, I/O and Python objects by name.
// expect: completed {"reachable": []}
const names = ['std', 'os', 'require', 'process', 'module', 'exports', 'print', 'scriptArgs',
  'load', '__loadScript', 'importScripts', 'bjson', 'gc', 'python', 'py', 'pyodide', '_quickjs',
  'quickjs', '__builtins__', 'globals', 'locals', 'setTimeout', 'setInterval', 'setImmediate',
  'clearTimeout', 'fetch', 'XMLHttpRequest', 'WebSocket', 'Deno', 'Bun', 'Worker',
  'WorkerGlobalScope', 'postMessage', 'navigator', 'location', 'document', 'window', 'self',
  'Buffer', '__dirname', '__filename', '__dsh_rt', '__host', 'host', 'config', 'outbox',
  'pending', 'settle', 'take', 'start', 'result', 'cancel'];
const reachable = [];
for (const name of names) {
  let found = false;
  try { found = typeof globalThis[name] !== 'undefined' || typeof eval(name) !== 'undefined'; } catch (e) {}
  if (found) reachable.push(name);
}
return {reachable};

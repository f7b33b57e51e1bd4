// Attack: CommonJS / Node-style access to the host (require, module, process.binding).
// expect: completed {"reachable": []}
const attempts = {
  require: () => require('fs').readFileSync('/etc/passwd', 'utf8'),
  globalRequire: () => globalThis.require('child_process'),
  moduleRequire: () => module.require('fs'),
  processBinding: () => process.binding('fs'),
  processEnv: () => process.env.HOME,
  stdOpen: () => std.open('pwned', 'w').puts('x'),
  osExec: () => os.exec(['touch', 'pwned']),
};
const reachable = [];
for (const [name, attempt] of Object.entries(attempts)) {
  try { attempt(); reachable.push(name); } catch (e) { /* unreachable */ }
}
return {reachable};

// Attack: read host files through workflow(): absolute paths, parent folders, non-.js files and
// odd targets, each caught; every attempt must be a fatal refusal that never quotes a file, and
// the engine (no library here) must say no workflows are available.
// expect: completed {"codes":["INVALID_ARGUMENT","INVALID_ARGUMENT","INVALID_ARGUMENT","INVALID_ARGUMENT","INVALID_ARGUMENT"],"leaked":false}
const targets = [{scriptPath: '/etc/passwd'}, {scriptPath: '../../../../etc/hostname'},
  {scriptPath: 'x.js', extra: 1}, 'no-such-workflow', {scriptPath: '/proc/self/environ'}];
const codes = [];
let leaked = false;
for (const t of targets) {
  try { await workflow(t); codes.push('ran'); }
  catch (e) { codes.push(e.code); if (/root:|canary/.test(e.message)) leaked = true; }
}
return {codes, leaked};

// Attack: overwrite and delete the hook globals; the script only changes its own bindings (its
// combinators use its replacement) and the real hook under another name still works.
// expect: completed {"replaced": ["forged"], "deleted": "undefined", "real": "ok:real", "frozen": true}
const realAgent = subagent;
globalThis.agent = () => 'forged';
const replaced = await parallel([() => agent('x')]);
delete globalThis.agent;
const deleted = typeof agent;
let frozen = true;
try { 'use strict'; realAgent.extra = 1; frozen = realAgent.extra === undefined; } catch (e) { frozen = true; }
return {replaced, deleted, real: await realAgent('real'), frozen};

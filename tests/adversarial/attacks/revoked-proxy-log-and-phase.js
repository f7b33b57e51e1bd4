// Attack: log(), phase() and console.log() given revoked Proxies inside parallel().
// expect: completed {"log": "INVALID_ARGUMENT", "phase": "INVALID_ARGUMENT", "console": "ok"}
const {proxy, revoke} = Proxy.revocable({}, {});
revoke();
const out = {};
for (const [name, f] of [['log', () => log(proxy)], ['phase', () => phase(proxy)]]) {
  try { await parallel([async () => f()]); out[name] = 'swallowed'; } catch (e) { out[name] = e.code; }
}
console.log('value:', proxy);
out.console = 'ok';
return out;

// Attack: revoked Proxies as parallel()'s thunk list, as one thunk, as pipeline()'s items and
// as a stage: each is a misuse the hook must refuse as fatal, not a swallowed TypeError.
// expect: completed ["INVALID_ARGUMENT", "INVALID_ARGUMENT", "INVALID_ARGUMENT", "INVALID_ARGUMENT"]
const revoked = (target) => { const r = Proxy.revocable(target, {}); r.revoke(); return r.proxy; };
const codes = [];
for (const call of [() => parallel(revoked([])), () => parallel([revoked(() => 1)]),
  () => pipeline(revoked([1]), (x) => x), () => pipeline([1], revoked((x) => x))]) {
  try { await call(); codes.push('accepted'); } catch (e) { codes.push(e && e.fatal === true ? e.code : 'not fatal: ' + e); }
}
return codes;

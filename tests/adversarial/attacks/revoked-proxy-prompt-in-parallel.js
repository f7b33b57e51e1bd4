// Attack: pass a revoked Proxy as agent()'s prompt inside parallel(): describing the bad value
// used to throw an ordinary TypeError, which parallel() swallowed as a null slot.
// expect: error INVALID_ARGUMENT "revoked Proxy"
const {proxy, revoke} = Proxy.revocable({}, {});
revoke();
return await parallel([() => agent(proxy)]);

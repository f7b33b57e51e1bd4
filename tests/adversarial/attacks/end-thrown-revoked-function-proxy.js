// Attack: throw a revoked Proxy of a function (typeof says "function").
// expect: error - "revoked Proxy"
const {proxy, revoke} = Proxy.revocable(function f() {}, {});
revoke();
throw proxy;

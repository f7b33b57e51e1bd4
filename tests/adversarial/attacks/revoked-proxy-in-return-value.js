// Attack: a revoked Proxy inside the return value.
// expect: error RESULT_UNSERIALIZABLE "return value.a[0]" "revoked Proxy"
const {proxy, revoke} = Proxy.revocable([], {});
revoke();
return {a: [proxy]};

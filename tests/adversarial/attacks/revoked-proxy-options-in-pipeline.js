// Attack: pass a revoked Proxy as agent() options inside a pipeline() stage.
// expect: error INVALID_ARGUMENT "revoked Proxy"
const {proxy, revoke} = Proxy.revocable({}, {});
revoke();
return await pipeline([1], () => agent('x', proxy));

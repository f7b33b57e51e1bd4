// Attack: a getter on the return value throws a revoked Proxy.
// expect: error RESULT_UNSERIALIZABLE "return value.list[1].y" "revoked Proxy"
const {proxy, revoke} = Proxy.revocable({}, {});
revoke();
return {list: [1, {get y() { throw proxy; }}]};

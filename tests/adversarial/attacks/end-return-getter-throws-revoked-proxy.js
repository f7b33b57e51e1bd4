// Attack: a getter on the return value throws a revoked Proxy.
// As with JSON.stringify, what the getter threw is the script's error, named with its path.
// expect: error - "return value.list[1].y" "revoked Proxy"
const {proxy, revoke} = Proxy.revocable({}, {});
revoke();
return {list: [1, {get y() { throw proxy; }}]};

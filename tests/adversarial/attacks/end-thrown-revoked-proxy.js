// Attack: throw a revoked Proxy (every operation on it throws a TypeError) while a child call
// is in flight.
// expect: error - "revoked Proxy"
const {proxy, revoke} = Proxy.revocable(new Error('hidden'), {});
revoke();
agent('still in flight');
throw proxy;

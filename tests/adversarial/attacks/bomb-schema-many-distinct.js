// Attack: many distinct, mid-sized schemas in a loop, all launched at once, so none can come
// from the verdict cache: each is checked on a worker thread in call order while the loop
// stays live; every call still completes.
// config: {"max_total_agents": 12, "max_concurrent_agents": 12}
// max-seconds: 15
// expect: completed 12
const calls = [];
for (let k = 0; k < 12; k++) {
  const properties = {};
  const salt = String(Math.random()).slice(2);  // fresh: not from the verdict cache
  for (let i = 0; i < 150; i++) properties['k' + salt + k + '_' + i] = {type: 'string', minLength: 0};
  calls.push(() => agent('STRUCTURED:{}', {schema: {type: 'object', properties}}));
}
const results = await parallel(calls);
return results.filter((r) => r !== null).length;

// Attack: the same large schema sent again and again (sequentially): only the first call may
// pay for the check; the rest come from the verdict cache, so 20 calls finish quickly.
// config: {"max_total_agents": 20}
// expect: completed 20
const properties = {};
for (let i = 0; i < 300; i++) properties['p' + i] = {type: 'string'};
let ok = 0;
for (let k = 0; k < 20; k++) {
  if (await agent('STRUCTURED:{}', {schema: {type: 'object', properties}}) !== null) ok++;
}
return ok;

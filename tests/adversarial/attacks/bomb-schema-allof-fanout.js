// Attack: the $defs fan-out through allOf: every branch must be checked, so even a RIGHT answer
// walks 2^22 paths. The careful outcome: validation stops at max_validation_steps and the
// child's answer counts as an ordinary failure (null), in bounded time, loop live.
// expect: completed null
const defs = {};
const n = 22;
for (let i = 0; i < n; i++) {
  defs['d' + i] = {allOf: [{$ref: '#/$defs/d' + (i + 1)}, {$ref: '#/$defs/d' + (i + 1)}]};
}
defs['d' + n] = {type: 'string'};
return await agent('STRUCTURED:' + JSON.stringify({a: 'abc'}), {schema: {
  type: 'object', $defs: defs, properties: {a: {$ref: '#/$defs/d0'}}, required: ['a'],
}});

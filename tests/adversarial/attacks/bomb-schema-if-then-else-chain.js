// Attack: an if/then/else chain where each level's if, then and else all refer to the next
// level: three walks per level, 3^16 in all. Bounded by the step budget: null, not a hang.
// expect: completed null
const defs = {};
const n = 16;
for (let i = 0; i < n; i++) {
  const next = {$ref: '#/$defs/d' + (i + 1)};
  defs['d' + i] = {if: next, then: next, else: next};
}
defs['d' + n] = {type: 'string', minLength: 10};
return await agent('STRUCTURED:' + JSON.stringify({a: 'short'}), {schema: {
  type: 'object', $defs: defs, properties: {a: {$ref: '#/$defs/d0'}}, required: ['a'],
}});

// Attack: a 1 KB schema whose $defs chain fans out through anyOf (each level refers twice to
// the next), so checking a wrong 3-character answer walks 2^20 paths — a minute of CPU on the
// host. The schema itself is valid and small, so the gate accepts it; value validation must
// stop at its step budget and treat the answer as an ordinary failure, while a right answer
// (found down the first path) still completes.
// expect: completed [{"a":"abcdef"},null]
const defs = {};
const n = 20;
for (let i = 0; i < n; i++) {
  defs['d' + i] = {anyOf: [{$ref: '#/$defs/d' + (i + 1)}, {$ref: '#/$defs/d' + (i + 1)}]};
}
defs['d' + n] = {type: 'string', minLength: 5};
const schema = {type: 'object', $defs: defs, properties: {a: {$ref: '#/$defs/d0'}}, required: ['a']};
const good = await agent('STRUCTURED:' + JSON.stringify({a: 'abcdef'}), {schema});
const bad = await agent('STRUCTURED:' + JSON.stringify({a: 'abc'}), {schema});
return [good, bad];

// Attack: oneOf fan-out combined with unevaluatedProperties, whose annotation collection walks
// the reference graph again (through $ref and $dynamicRef in the same node) on top of the
// validation itself. Neither walk may escape the step budget.
// expect: completed null
const defs = {};
const n = 20;
for (let i = 0; i < n; i++) {
  const next = '#/$defs/d' + (i + 1);
  defs['d' + i] = {$ref: next, $dynamicRef: next, oneOf: [{$ref: next}, {$ref: next}]};
}
defs['d' + n] = {properties: {a: {type: 'string'}}};
return await agent('STRUCTURED:' + JSON.stringify({a: 'x', b: 1}), {schema: {
  type: 'object', $ref: '#/$defs/d0', $defs: defs, unevaluatedProperties: false,
}});

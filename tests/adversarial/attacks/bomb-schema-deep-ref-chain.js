// Attack: a long linear $ref chain (300 definitions, each referring to the next). It is
// legitimate, if odd: linear work, within every limit. The careful outcome is the child's
// valid answer, promptly.
// expect: completed {"a":"fine"}
const defs = {};
const n = 300;
for (let i = 0; i < n; i++) defs['d' + i] = {$ref: '#/$defs/d' + (i + 1)};
defs['d' + n] = {type: 'string'};
return await agent('STRUCTURED:' + JSON.stringify({a: 'fine'}), {schema: {
  type: 'object', $defs: defs, properties: {a: {$ref: '#/$defs/d0'}}, required: ['a'],
}});

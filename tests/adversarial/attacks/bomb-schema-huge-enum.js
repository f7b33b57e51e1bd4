// Attack: a schema with a 50,000-member enum. Each member is cheap, but the schema is far
// beyond anything a structured answer needs; the gate must refuse it by counting, before any
// validator sees it, naming the limit.
// expect: error UNSUPPORTED_SCHEMA 'max_schema_nodes=1000'
const members = [];
for (let i = 0; i < 50000; i++) members.push('v' + i);
return await agent('x', {schema: {type: 'object', properties: {a: {enum: members}}}});

// Attack: the same shape one notch bigger: just over max_schema_nodes. Refused, naming it.
// expect: error UNSUPPORTED_SCHEMA 'max_schema_nodes=1000'
const properties = {};
for (let i = 0; i < 510; i++) properties['p' + i] = {type: 'string'};
return await agent('x', {schema: {type: 'object', properties}});

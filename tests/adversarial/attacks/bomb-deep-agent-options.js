// Attack: agent() options (a schema) nested 10,000 deep, to overflow the host's JSON decoder
// or schema checker.
// config: {"stack_limit_bytes": 1048576}
// expect: error INVALID_ARGUMENT max_value_depth
let s = {type: 'object'};
for (let i = 0; i < 10000; i++) s = {type: 'object', properties: {a: s}};
return await agent('x', {schema: s});

// Attack: one huge repeat count, hidden behind a property-name the model might well use.
// expect: error UNSUPPORTED_SCHEMA 'max_pattern_cost=20000'
return await agent('x', {schema: {type: 'object',
  properties: {id: {type: 'string', pattern: '^[a-z]{4000000}$'}}}});

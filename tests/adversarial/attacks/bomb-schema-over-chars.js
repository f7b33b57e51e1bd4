// Attack: a schema of few nodes but a 300,000-character description: over max_schema_chars.
// expect: error UNSUPPORTED_SCHEMA 'max_schema_chars=100000'
return await agent('x', {schema: {type: 'object', description: 'y'.repeat(300000),
  properties: {a: {type: 'string'}}}});

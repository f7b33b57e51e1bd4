// Attack: a pattern in verbose mode, whose comments can hide parentheses and repeats from a
// scan of the pattern. Refused at the gate rather than compiled blind.
// expect: error UNSUPPORTED_SCHEMA 'verbose'
return await agent('x', {schema: {type: 'object',
  properties: {a: {type: 'string', pattern: '(?x) # ((\n (a{100}){100}'}}}});

// Attack: a subschema that declares "$schema" itself, hoping validation switches to a stock
// validator (with backtracking matching) for it; its pattern is catastrophic for the answer.
// expect: completed null
return await agent('STRUCTURED:' + JSON.stringify({a: 'a'.repeat(40) + '!'}), {schema: {
  type: 'object', properties: {a: {$schema: 'https://json-schema.org/draft/2020-12/schema',
    type: 'string', pattern: '^(a|a)+$'}}, required: ['a'],
}});

// Attack: a catastrophic pattern as a patternProperties key, with additionalProperties false,
// and a child whose key triggers the backtracking. Matching runs under the time budget: null.
// expect: completed null
const key = 'a'.repeat(40) + '!';
return await agent('STRUCTURED:' + JSON.stringify({[key]: 1}), {schema: {
  type: 'object', patternProperties: {'^(a+)+$': {}}, additionalProperties: false,
}});

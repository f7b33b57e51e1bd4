// Attack: the schema asks for a regular expression (format: regex) and the child answers with
// a nested-repeat bomb: checking the format must not compile it. The value is refused (null).
// expect: completed null
return await agent('STRUCTURED:' + JSON.stringify({re: '(((x{90}){90}){90}){90}'}), {schema: {
  type: 'object', properties: {re: {type: 'string', format: 'regex'}}, required: ['re'],
}});

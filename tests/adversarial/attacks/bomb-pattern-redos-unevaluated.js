// Attack: the same catastrophic key pattern reached through unevaluatedProperties, whose
// annotation collection matches patternProperties keys again. Bounded as well: the value is
// refused (null) in bounded time.
// expect: completed null
const key = 'a'.repeat(40) + '!';
return await agent('STRUCTURED:' + JSON.stringify({[key]: 1}), {schema: {
  type: 'object', patternProperties: {'^(a+)+$': {}}, unevaluatedProperties: false,
}});

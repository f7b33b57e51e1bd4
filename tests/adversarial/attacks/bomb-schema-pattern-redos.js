// Attack: a schema whose `pattern` backtracks catastrophically, answered by a (cooperative)
// model with a value that triggers it. The pattern is evaluated by the host when it validates
// the child's value — on the event loop, where it would freeze every run of the process.
// The careful outcome: the value is rejected (null) in bounded time, the loop stays live.
// expect: completed null
const value = JSON.stringify({a: 'a'.repeat(26) + '!'});
return await agent('STRUCTURED:' + value, {schema: {
  type: 'object', properties: {a: {type: 'string', pattern: '^(a+)+$'}}, required: ['a'],
}});

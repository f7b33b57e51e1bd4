// Attack: a 21-character pattern of nested counted repeats. Compiling it expands every repeat:
// about a million units, seconds of CPU and gigabytes of memory, before any matching timeout
// applies. The gate must refuse it by analysis, without compiling it, naming the limit.
// expect: error UNSUPPORTED_SCHEMA 'max_pattern_cost=20000' pattern
return await agent('x', {schema: {type: 'object',
  properties: {a: {type: 'string', pattern: '((a{100}){100}){100}'}}}});

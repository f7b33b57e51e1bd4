// Attack: many patterns that are each affordable (about 420 units) but together compile to
// more than max_pattern_cost: the budget is per schema, not per pattern.
// expect: error UNSUPPORTED_SCHEMA 'max_pattern_cost=20000'
const properties = {};
for (let i = 0; i < 80; i++) properties['p' + i] = {type: 'string', pattern: '(?:a{20}){20}'};
return await agent('x', {schema: {type: 'object', properties}});

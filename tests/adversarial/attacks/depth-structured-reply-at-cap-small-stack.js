// Attack: ask for a structured value nested near the deepest max_value_depth, under the
// smallest stack that depth allows, then return it: the settle (a recursive JSON.parse) and the
// copy back out must both fit.
// config: {"stack_limit_bytes": 81920, "max_value_depth": 512}
// expect: completed-len 1
const value = await agent('DEEP:510', {schema: {type: 'object'}});
if (value === null) throw new Error('the deep reply did not arrive');
return value;

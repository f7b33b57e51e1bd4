// Attack: ask for a structured value nested near max_value_depth under the smallest stack, then
// return it and send it back as options: settle, copy and options check must all fit.
// config: {"stack_limit_bytes": 65536, "max_value_depth": 512}
// expect: completed-len 1
const value = await agent('DEEP:500', {schema: {type: 'object'}});
if (value === null) throw new Error('the deep reply did not arrive');
return value;

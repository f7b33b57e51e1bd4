// Attack: ask for a structured value nested past max_value_depth under the smallest stack:
// parsing it inside the script would overflow the stack and be blamed on the script; the host
// must drop it (the call resolves null) and the run goes on.
// config: {"stack_limit_bytes": 65536, "max_value_depth": 16}
// expect: completed {"value": null, "after": "ok:after"}
const value = await agent('DEEP:2000', {schema: {type: 'object'}});
return {value, after: await agent('after')};

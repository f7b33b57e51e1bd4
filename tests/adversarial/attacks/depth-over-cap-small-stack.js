// Attack: return an object nested past max_value_depth under the smallest stack: the refusal
// must name max_value_depth, not blame the script's recursion on the stack limit.
// config: {"stack_limit_bytes": 65536, "max_value_depth": 16}
// expect: error RESULT_UNSERIALIZABLE max_value_depth=16
let v = {leaf: true};
for (let i = 0; i < 40; i++) v = {v};
return v;

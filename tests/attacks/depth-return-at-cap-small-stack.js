// Attack: return arrays nested exactly max_value_depth deep under the smallest stack the
// configuration allows: the boundary must not run out of stack within its own documented cap.
// config: {"stack_limit_bytes": 65536, "max_value_depth": 512}
// expect: completed-len 1
let v = [];
for (let i = 0; i < 511; i++) v = [v];
return v;

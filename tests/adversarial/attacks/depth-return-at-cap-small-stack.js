// Attack: return arrays nested exactly max_value_depth deep under the smallest stack the
// configuration allows (64 KiB holds 409 levels): the boundary must not run out of stack within
// its own documented cap (it used to need ~3 KB of stack per level).
// config: {"stack_limit_bytes": 65536, "max_value_depth": 409}
// expect: completed-len 1
let v = [];
for (let i = 0; i < 408; i++) v = [v];
return v;

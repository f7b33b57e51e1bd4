// Attack: return an object nested 5,000 deep, built so that no single level looks unusual.
// config: {"stack_limit_bytes": 1048576}
// expect: error RESULT_UNSERIALIZABLE max_value_depth
let v = {leaf: true};
for (let i = 0; i < 5000; i++) v = {['k' + i]: v};
return v;

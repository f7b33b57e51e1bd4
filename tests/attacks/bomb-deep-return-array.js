// Attack: return an array nested 100,000 deep (would overflow Python's JSON recursion).
// (With the corpus's 256 KiB stack, copying runs out of stack before max_value_depth.)
// expect: error RESOURCE_LIMIT stack_limit_bytes
let v = [];
for (let i = 0; i < 100000; i++) v = [v];
return v;

// Attack: return an array nested 100,000 deep (would overflow Python's JSON recursion).
// (The boundary copies iteratively, so even the corpus's 256 KiB stack reaches max_value_depth.)
// expect: error RESULT_UNSERIALIZABLE max_value_depth=256
let v = [];
for (let i = 0; i < 100000; i++) v = [v];
return v;

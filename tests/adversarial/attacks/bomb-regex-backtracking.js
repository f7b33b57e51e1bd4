// Attack: a regular expression with catastrophic backtracking, run by QuickJS (one long
// synchronous call into the engine's regexp matcher).
// expect: error RESOURCE_LIMIT slice_cpu_limit_s=0.2
return /^(a+)+$/.test('a'.repeat(40) + '!');

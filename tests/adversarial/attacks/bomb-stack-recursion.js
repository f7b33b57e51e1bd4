// Attack: unbounded recursion.
// expect: error RESOURCE_LIMIT stack_limit_bytes=262144
function f(n) { return f(n + 1) + 1; }
return f(0);

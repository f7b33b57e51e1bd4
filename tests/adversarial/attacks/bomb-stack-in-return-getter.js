// Attack: overflow the stack inside a getter the runtime calls while copying the return value.
// expect: error RESOURCE_LIMIT stack_limit_bytes=262144
function f() { return f() + 1; }
return {get a() { return f(); }};

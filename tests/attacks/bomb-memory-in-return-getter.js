// Attack: exhaust memory inside a getter the runtime calls while copying the return value.
// expect: error RESOURCE_LIMIT memory_limit_bytes=16777216
return {get a() { const x = []; for (;;) x.push('y'.repeat(1000) + x.length); }};

// Attack: exhaust memory inside a promise job (a then() callback) that the script awaits.
// expect: error RESOURCE_LIMIT memory_limit_bytes=16777216
const grow = () => { const a = []; for (;;) a.push('y'.repeat(4096) + a.length); };
await Promise.resolve().then(grow);
return 'survived';

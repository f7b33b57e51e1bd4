// Attack: throw an Error named RESOURCE_LIMIT so its text reads exactly like the engine's own
// memory-limit report.
// expect: error - "the script's own error: RESOURCE_LIMIT: the script ran out of memory"
const e = new Error('the script ran out of memory: it exceeded memory_limit_bytes=16777216');
e.name = 'RESOURCE_LIMIT';
throw e;

// Attack: throw null: the script's own failure must not be reported as an engine limit.
// expect: error - null
// xfail: `throw null` is reported as RESOURCE_LIMIT "ran out of memory" (the runtime cannot tell it from an out-of-memory that could not allocate its error)
throw null;

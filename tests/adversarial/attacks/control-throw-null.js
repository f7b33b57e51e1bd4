// Attack: throw null: the script's own failure must not be reported as an engine limit.
// expect: error - null
throw null;

// Attack: take a genuine engine-made InternalError (a string that is too long) and rethrow it
// unchanged: a real engine error that is not a limit must not read as one.
// expect: error - "InternalError"
let e = null;
try { let s = 'x'; for (;;) s += s; } catch (x) { e = x; }
throw e;

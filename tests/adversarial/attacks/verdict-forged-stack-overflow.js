// Attack: throw a hand-made RangeError('Maximum call stack size exceeded'), called without
// `new`, hoping to be reported as having hit stack_limit_bytes.
// expect: error - "RangeError: Maximum call stack size exceeded"
throw RangeError('Maximum call stack size exceeded');

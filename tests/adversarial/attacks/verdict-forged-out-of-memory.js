// Attack: throw a hand-made InternalError('out of memory'), hoping to be reported as having
// hit memory_limit_bytes.
// expect: error - "InternalError: out of memory"
throw new InternalError('out of memory');

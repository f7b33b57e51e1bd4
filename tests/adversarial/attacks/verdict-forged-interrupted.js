// Attack: throw a hand-made InternalError('interrupted') at once, hoping to be reported as a
// CPU-slice overrun (after 0 s of CPU).
// expect: error - "InternalError: interrupted"
throw new InternalError('interrupted');

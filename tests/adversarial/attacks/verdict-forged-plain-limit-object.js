// Attack: throw a plain object with the name, message and stack of the engine's limit errors.
// expect: error - "not an Error" "Maximum call stack size exceeded"
throw {name: 'RangeError', message: 'Maximum call stack size exceeded',
  stack: '    at f (<input>:1:1)\n', constructor: RangeError, toString() { return 'RangeError: Maximum call stack size exceeded'; }};

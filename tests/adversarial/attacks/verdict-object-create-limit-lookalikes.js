// Attack: throw an object made from InternalError.prototype with the out-of-memory message (no
// constructor call, so no record of being made by the script).
// expect: error - "not an Error" "out of memory"
throw Object.create(InternalError.prototype, {message: {value: 'out of memory'}, stack: {value: ''}});

// Attack: spinning and throwing toJSON methods (own non-enumerable, and inherited): the value
// boundary must not call them, so they can neither spin nor forge the result.
// expect: completed {"a": 1, "b": [2]}
Object.prototype.toJSON = function () { for (;;) {} };
Array.prototype.toJSON = function () { throw new Error('toJSON'); };
const value = {a: 1, b: [2]};
Object.defineProperty(value, 'toJSON', {value() { return 'forged'; }, enumerable: false});
return value;

// Attack: spinning and throwing toJSON methods (own non-enumerable, and inherited). The return
// value follows JSON.stringify (SPEC §21), so the value's own toJSON decides what it becomes (the
// script's own choice, not a forgery of anything the host says); the spinning and throwing
// inherited ones are never reached, and the run ends normally.
// expect: completed "forged"
Object.prototype.toJSON = function () { for (;;) {} };
Array.prototype.toJSON = function () { throw new Error('toJSON'); };
const value = {a: 1, b: [2]};
Object.defineProperty(value, 'toJSON', {value() { return 'forged'; }, enumerable: false});
return value;

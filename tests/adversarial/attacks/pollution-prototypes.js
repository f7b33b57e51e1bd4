// Attack: pollute every shared prototype and intrinsic this run can reach, hoping the change
// leaks into a sibling run on the same engine or into the next run.
// expect: completed "polluted"
Object.prototype.polluted = 'yes';
Object.defineProperty(Object.prototype, 'ok', {get() { return 'forged'; }, configurable: true});
Array.prototype.polluted = 'yes';
Array.prototype.push = function () { return 0; };
Function.prototype.polluted = 'yes';
Promise.prototype.then = function () { return this; };
JSON.stringify = () => '"forged"';
JSON.parse = () => 'forged';
String.prototype.polluted = 'yes';
Error.prototype.polluted = 'yes';
globalThis.agent = () => 'forged';
globalThis.log = () => undefined;
globalThis.sharedMarker = 'leaked';
Math.random = () => 4;
Object.freeze(Object.prototype);
return 'polluted';
